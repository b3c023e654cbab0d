"""A Slurm task's outcome, read from the files it left in its round's directory: the
result JSON (written, then renamed), the build's record, and each run's log."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from ...core.records import SlurmJob
from ...core.search import RepeatPolicy, Verdict
from ...core.verdicts import BuildFact, RunFact, judge_probe
from ..base import ProbeOutcome, cap_log, last_json_line
from .companions import failed


def result_path(rdir: Path, job: SlurmJob) -> Path:
    return rdir / f"result-{job.task}.json"


def read_result(rdir: Path, job: SlurmJob, policy: RepeatPolicy, *,
                build_limit: float | None, test_limit: float | None,
                companions: Sequence[str] = ()) -> ProbeOutcome | None:
    """The task's judged outcome, or None while it has no result file."""
    path = result_path(rdir, job)
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    n = job.task
    why = failed(data, list(companions), rdir, n)
    if why:        # a --with companion did not build against this torch
        return ProbeOutcome(Verdict.SKIP, why, logs={
            "companion": rdir / f"companion-{n}-{data['companion_failed']}.log"},
            details={"slurm_test_job": f"{job.test_job}_{n}", "attempt": job.attempt})
    logs = {"build": rdir / f"build-{n}.log"} if (rdir / f"build-{n}.log").exists() else {}
    built = (data.get("build") if data.get("build_failed") else None) or (
        json.loads((rdir / f"build-{n}.json").read_text())
        if (rdir / f"build-{n}.json").exists() else {})
    build = None
    if built.get("build_ms") or data.get("build_failed"):
        code = built.get("exit_code")
        build = BuildFact(code, (built.get("build_ms") or 0) / 1000,
                          timed_out=bool(build_limit) and code == 124, limit=build_limit)
    facts = []
    for run, (code, ms) in enumerate(zip(data.get("codes", []), data.get("ms", [])), 1):
        logs[f"test-{run}"] = log = rdir / f"test-{n}-{run}.log"
        cap_log(log)
        text = log.read_text(errors="replace") if log.exists() else ""
        # timeout(1) exits 124, or 128 + 9 when the test outlived its TERM (`-k`): a
        # timeout only if the run lasted the limit (a test's own 124 or OOM kill does not)
        timed_out = data.get("timeout_code") is not None and \
            code in (data["timeout_code"], 128 + 9) and ms >= (test_limit or 0) * 1000
        facts.append(RunFact(code, ms / 1000, timed_out, test_limit, last_json_line(text)))
    outcome = judge_probe(build, facts, policy, job.expect or None)
    outcome.logs = logs
    outcome.details = dict(outcome.details, slurm_test_job=f"{job.test_job}_{n}",
                           attempt=job.attempt, node=data.get("node"),
                           build_reused=not built.get("build_ms"))
    return outcome
