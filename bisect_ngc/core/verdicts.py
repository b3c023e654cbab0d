"""From what a backend saw to a verdict: one pure pipeline for every backend.

Backends report facts: the build's exit code or timeout, and each test run's exit code,
timeout and JSON line. These functions turn them into a verdict and a reason, worded the
same everywhere, and say whether the outcome may be cached: only passes, failures, skips
the test itself asked for (exit 125) and failed builds are properties of the commit;
everything else (timeouts, signals, a wrong torch in the container) may differ next time.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .search import RepeatPolicy, Verdict, combine_runs


@dataclass(frozen=True)
class BuildFact:
    exit_code: int | None
    seconds: float | None = None
    timed_out: bool = False
    limit: float | None = None         # the timeout in force, for the wording


@dataclass(frozen=True)
class RunFact:
    exit_code: int | None
    seconds: float = 0.0
    timed_out: bool = False
    limit: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class ProbeOutcome:
    verdict: Verdict
    reason: str = ""
    exit_code: int | None = None
    build_s: float | None = None
    test_s: float | None = None
    checkout_s: float | None = None
    runs: list[Verdict] = field(default_factory=list)
    logs: dict[str, Path] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    cacheable: bool = True    # False: a skip of this run's circumstances, retried next time
    transient: bool = False   # interrupted: never recorded
    crashed: int | None = None  # a run's exit of 128+, or its signal (< 0): the bisection stops


def _secs(limit: float | None) -> str:
    return f" after {limit:g}s" if limit else ""


def judge_exit(code: int | None) -> tuple[Verdict, str, bool]:
    """The `git bisect run` protocol: 0 pass, 125 skip, 1-127 fail; 128 and above, or a
    signal, a crash (no verdict: `judge_probe` marks it, and the bisection stops, as git's
    does). Returns (verdict, reason, cacheable)."""
    if code is None:
        return Verdict.SKIP, "the test gave no exit code", False
    if code == 0:
        return Verdict.PASS, "", True
    if code == 125:
        return Verdict.SKIP, "test exited 125 (cannot test)", True
    if code == 127:
        return Verdict.FAIL, ("test exited 127 (command not found; it runs in a fresh "
                              "worktree of the commit, where files git does not track are "
                              "missing)"), True
    if 1 <= code <= 127:
        return Verdict.FAIL, "", True
    if code < 0:
        return Verdict.SKIP, f"test killed by signal {-code}", False
    return Verdict.SKIP, f"test exited {code} (128 or above: a crash, no verdict)", False


def reported_commit(details: dict[str, Any]) -> str | None:
    """The torch commit a run reports: `torch_git_version`, or where that is missing or
    "Unknown" (as in NGC images) the local part of `torch_version`
    (`2.5.0a0+b465a5843b.nv24.09` -> `b465a5843b`), a prefix of the sha."""
    git = str(details.get("torch_git_version") or "")
    if re.fullmatch(r"[0-9a-f]{40}", git):
        return git
    local = str(details.get("torch_version") or "").partition("+")[2].split(".")[0]
    return local if re.fullmatch(r"[0-9a-f]{7,40}", local) else (git or None)


def judge_run(run: RunFact, expect_commit: str | None = None) -> tuple[Verdict, str, bool]:
    """One test run. With expect_commit (one sha, or several separated by commas, any of
    which will do), the run's JSON must name that torch commit."""
    if run.timed_out:
        return Verdict.SKIP, f"test timed out{_secs(run.limit)}", False
    verdict, reason, cacheable = judge_exit(run.exit_code)
    if run.exit_code == 125 and run.details.get("skip_reason"):   # it said why it cannot test
        reason = str(run.details["skip_reason"])[:400]
    if expect_commit and verdict is not Verdict.SKIP:
        accepted = [e for e in expect_commit.split(",") if e]
        seen = reported_commit(run.details)
        if not (seen and len(seen) >= 7 and any(e.startswith(seen) for e in accepted)):
            return (Verdict.SKIP, f"the container reports torch git version {seen or 'none'}, "
                                  f"not the probed commit {accepted[0][:12]}", False)
    return verdict, reason, cacheable


def judge_build(build: BuildFact) -> ProbeOutcome | None:
    """A skip for a failed build, or None when the build succeeded."""
    if build.timed_out:
        return ProbeOutcome(Verdict.SKIP, f"build timed out{_secs(build.limit)}",
                            exit_code=build.exit_code, build_s=build.seconds, cacheable=False)
    if build.exit_code != 0:
        return ProbeOutcome(Verdict.SKIP, f"build failed (exit {build.exit_code})",
                            exit_code=build.exit_code, build_s=build.seconds)
    return None


def judge_probe(build: BuildFact | None, runs: Sequence[RunFact], policy: RepeatPolicy,
                expect_commit: str | None = None) -> ProbeOutcome:
    """The probe's verdict from its build and its test runs (in order)."""
    if build is not None:
        failed = judge_build(build)
        if failed is not None:
            return failed
    build_s = build.seconds if build else None
    if not runs:
        return ProbeOutcome(Verdict.SKIP, "no test ran", build_s=build_s, cacheable=False)
    judged = [judge_run(r, expect_commit) for r in runs]
    verdicts = [v for v, _, _ in judged]
    verdict = combine_runs(verdicts, policy)
    reason, cacheable = "", True
    if verdict is Verdict.SKIP:
        skips = [(why, ok) for v, why, ok in judged if v is Verdict.SKIP]
        if skips:
            reason, cacheable = skips[0][0], all(ok for _, ok in skips)
        else:
            reason, cacheable = "repeated runs split evenly between pass and fail", False
    else:
        reason = next((why for v, why, _ in judged if v is verdict and why), "")
    deciding = next((r for r, (v, _, _) in zip(runs, judged) if v is verdict), runs[-1])
    crashed = next((r.exit_code for r in runs if not r.timed_out and r.exit_code is not None
                    and (r.exit_code >= 128 or r.exit_code < 0)), None)
    return ProbeOutcome(verdict, reason, exit_code=deciding.exit_code, build_s=build_s,
                        test_s=sum(r.seconds for r in runs), runs=verdicts,
                        details=dict(deciding.details), cacheable=cacheable, crashed=crashed)
