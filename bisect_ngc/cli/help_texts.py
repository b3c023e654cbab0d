"""The texts after the options in `--help`: exit codes, the test's verdicts, release mode."""

EXIT_CODES_HELP = """\b
Exit codes:
  0    found the first commit with the new behaviour
  2    bad input (unknown release or revision, no Docker engine, state in
       use, a test that exited 128 or above, ...)
  3    invalid endpoints (both behave the same, or one cannot be tested;
       with --metric: their numbers do not differ by --min-change)
  4    ambiguous (untestable commits hide the transition; listed)
  5    not in these commits: the images differ, but builds of their
       commits in one base image do not (another part of the container)
  130  interrupted (143 by SIGTERM, 129 by SIGHUP); the state is kept,
       and the same command resumes
"""

VERDICT_HELP = """\b
The test command follows `git bisect run`:
  exit 0 = pass, 125 = cannot test (skip), 1-127 = fail;
  128 and above or a signal (a crash) stops the bisection, as git does;
  past --timeout = skip. A failed build is a skip too.
It runs in a fresh worktree of each commit (a file git does not track is
not there: name it by its absolute path), with BISECT_COMMIT,
BISECT_WORKTREE and BISECT_ARTIFACTS set (in the container too, with
--backend docker, where the test also sees the build's artifacts).
Passes, failures, exit-125 skips and failed builds are cached; other skips
(timeouts, infrastructure errors) are probed again next time.
"""

RELEASE_HELP = """\b
Release mode: --from and --to take an NGC release (24.09), an image
(nvcr.io/nvidia/pytorch:24.09-py3) or a commit. The repository is PyTorch
(--torch-repo), the base image is the older release's (--base-image), and
each probe builds a wheel in that image and runs `python -m repro` on it
in a fresh container with the GPUs.
"""
