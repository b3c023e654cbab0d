"""What to do when a run contradicts what was remembered, said once for every judge: a
cached verdict that a fresh run contradicts (a key blind to what the test reads), and a
kept build that behaves otherwise than right after it was built."""
from __future__ import annotations


def stale_cache(commits: list[str]) -> str:
    """Advice for cached verdicts of `commits` that fresh runs contradict."""
    shown = " ".join(f"--commit {sha[:12]}" for sha in commits[:3])
    return (f"the cached verdict{'s' if len(commits) > 1 else ''} may be stale (made under a "
            "build or test that the cache key does not tell apart from this one, say a file "
            "or variable the test reads): drop "
            f"{'them' if len(commits) > 1 else 'it'} with `bisect-ngc forget {shown}` (and "
            "the same --state), pass --key-env VAR for a variable the test reads, and run the "
            "same command again")


def kept_build(index: int) -> str:
    """Advice for a commit whose kept build behaved otherwise than its fresh build."""
    return (f"#{index} behaved otherwise on its kept build: if the build installs outside "
            "the worktree and $BISECT_ARTIFACTS (a shared virtualenv, say), pass --rebuild")
