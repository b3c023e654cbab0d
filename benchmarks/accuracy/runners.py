"""One case through the real CLI (`bisect-ngc bisect`, the local backend, a state of its
own) and through `git bisect run` on the same build and test scripts."""
from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import subprocess
from pathlib import Path

from bisect_ngc.cli.main import main
from tests.lib.histories import Case

from .outcomes import Outcome, grade


def tool(case: Case, state: Path) -> Outcome:
    """bisect-ngc's answer, its test runs and the distinct commits it built."""
    case.scripts_for("tool")
    argv = ["bisect", "--repo", str(case.repo), "--old", case.old, "--new", case.new,
            "--build", case.build, "--test", case.test, "--state", str(state), "--quiet",
            "--json", *case.extra]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    try:
        res = json.loads(out.getvalue())
    except ValueError:
        res = {"status": f"error {code}", "message": err.getvalue()[-300:]}
    named = res.get("first_new")
    runs, builds = case.counts("tool")
    return Outcome(case.family, case.cell, case.seed, "bisect-ngc", res.get("status", "error"),
                   named, grade(res.get("status", ""), named, res.get("candidates") or [],
                                planted=case.planted, nameable=case.nameable,
                                also_right=case.also_right),
                   runs, builds, confidence=res.get("confidence"),
                   note=str(res.get("explanation") or res.get("message") or "")[:300],
                   extra={"exit": code, "merge": bool(res.get("descents"))})


_FIRST_BAD = re.compile(r"^([0-9a-f]{40}) is the first bad commit", re.M)
_SKIPPED = re.compile(r"The first bad commit could be any of:\n((?:[0-9a-f]{40}\n?)+)")


def git(case: Case) -> Outcome:
    """`git bisect run` on the same scripts: a build that fails is a skip (exit 125)."""
    case.scripts_for("git")

    def run(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=case.repo, capture_output=True, text=True)
        return done.stdout + done.stderr
    run("bisect", "reset")
    run("bisect", "start", case.new, case.old)
    step = f"{case.build} || exit 125; {case.test}"
    said = run("bisect", "run", "sh", "-c", step)
    run("bisect", "reset")
    first = _FIRST_BAD.search(said)
    skipped = _SKIPPED.search(said)
    status = "found" if first else "ambiguous" if skipped else "error"
    named = first.group(1) if first else None
    candidates = skipped.group(1).split() if skipped else []
    runs, builds = case.counts("git")
    return Outcome(case.family, case.cell, case.seed, "git bisect run", status, named,
                   grade(status, named, candidates, planted=case.planted,
                         nameable=case.nameable, also_right=case.also_right), runs, builds,
                   note="" if first or skipped else said.strip().splitlines()[-1:][0][:200]
                   if said.strip() else "")


def reproduce(family: str, seed: int, index: int) -> str:
    return shlex.join(["python", "-m", "benchmarks.accuracy", "--only", family,
                       "--seed", str(seed), "--case", str(index)])
