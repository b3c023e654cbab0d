"""What the tests and the benchmarks share: generated git repositories shaped like the
real ones (repos, companion_repos) and scripted backends (fakes). benchmarks/ imports
these; nothing here imports a test module."""
