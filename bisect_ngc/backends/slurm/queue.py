"""What the Slurm scheduler says, and the pure rules that read it: which phase a probe's
tasks are in, and how a task that left the queue without a result ended."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

from ...errors import UserError
from ...core.records import SlurmJob

RETRYABLE = {"PREEMPTED", "NODE_FAIL", "REQUEUED", "CANCELLED", "BOOT_FAIL", "DEADLINE"}
ENDED = RETRYABLE | {"COMPLETED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY"}

# A task that neither the queue nor the accounting knows this long after it was submitted
# is lost and resubmitted: slurmdbd records a job seconds after it starts, and a busy
# controller may take a minute to answer.
UNACCOUNTED_AFTER_S = 120.0

ENDED_WITHOUT_RESULT = {"TIMEOUT": "job hit the Slurm time limit (--time)",
                         "OUT_OF_MEMORY": "job ran out of memory"}


def end_action(state: str, cancelled_by_us: bool) -> str:
    """What follows a task that ended without a result: "resubmit" (the same attempt),
    "retry" (one more attempt) or "skip". A task cut short mid-test can be accounted
    COMPLETED, and without a result that is no verdict either."""
    cut_short = state in ("CANCELLED", "COMPLETED")
    if cut_short and cancelled_by_us:
        return "resubmit"
    return "retry" if cut_short or state in RETRYABLE | {"UNKNOWN"} else "skip"


def queue_phase(job: SlurmJob, states: dict[str, str]) -> str | None:
    """What squeue says a probe's tasks are doing: build, test, queued, or None once
    neither task is in the queue."""
    def state(jid: str | None) -> str | None:
        return states.get(f"{jid}_{job.task}") or states.get(jid) if jid else None
    test, build = state(job.test_job), state(job.build_job)
    if test in ("RUNNING", "COMPLETING"):
        return "test"
    if build in ("RUNNING", "COMPLETING"):
        return "build"
    return None if test is None and build is None else "queued"


def task_end(test_state: str | None, build_state: str | None, age_s: float) -> str | None:
    """How a probe task that left the queue without a result ended, from the accounting
    states of its test and build array tasks; None while that is not known yet."""
    if build_state in RETRYABLE | {"TIMEOUT", "OUT_OF_MEMORY", "FAILED"} and \
            test_state in (None, "CANCELLED", "PENDING"):
        test_state = build_state    # the build task's end decided the test task's fate
    if test_state in ENDED:
        return test_state
    if test_state is None and age_s > UNACCOUNTED_AFTER_S:
        return "UNKNOWN"
    return None


class Scheduler:
    """The Slurm commands, with errors turned into UserError."""

    def run(self, argv: list[str], *, what: str, may_fail: bool = False) -> str:
        if shutil.which(argv[0]) is None:
            raise UserError(f"{argv[0]} is not on PATH: this host is not a Slurm client",
                            hint="run on a login node, or install slurm-client")
        if os.environ.get("BISECT_NGC_SLURM_CALL_LOG"):   # for benchmarks/slurm_rounds.py
            with open(os.environ["BISECT_NGC_SLURM_CALL_LOG"], "a") as log:
                log.write(f"{time.time():.3f} {argv[0]}\n")
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0 and may_fail:
            return ""
        if proc.returncode != 0:
            msg = (proc.stderr or proc.stdout).strip().splitlines()
            last = msg[-1] if msg else f"exit {proc.returncode}"
            hint = ("the partition has no GPUs (gres/gpu): pass --gpu-partition, or "
                    "--gpus-per-probe 0 for tests that need none") if "gres" in last.lower() \
                else ("check the partition, account and QOS (`sinfo -s`, "
                      "`sacctmgr show assoc user=$USER`)")
            raise UserError(f"{what} failed: {last}", hint=hint)
        return proc.stdout

    def queue(self, jobs: set[str]) -> dict[str, str]:
        """One squeue call for jobs still known to the scheduler: state by job or task id."""
        # squeue fails on ids it has already forgotten: those jobs have ended.
        out = self.run(["squeue", "-h", "-j", ",".join(sorted(jobs)), "-o", "%i|%T"],
                       what="squeue", may_fail=True) if jobs else ""
        states = {}
        for line in out.splitlines():
            job, _, state = line.partition("|")
            states[job.strip()] = state.strip()
            if "_[" in job:          # a pending array range like 12_[0-3]
                states[job.split("_")[0]] = state.strip()
        return states

    def accounting(self, ids: list[str]) -> dict[str, str]:
        """One sacct call: the final state by job or task id."""
        out = self.run(["sacct", "-n", "-P", "-X", "-j", ",".join(ids), "-o", "JobID,State"],
                       what="sacct")
        states = {}
        for line in out.splitlines():
            jid, _, state = line.partition("|")
            states[jid] = state.split()[0] if state else ""
        return states
