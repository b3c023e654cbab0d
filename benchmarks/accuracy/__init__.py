"""The open accuracy benchmark (issue 49): python -m benchmarks.accuracy."""
