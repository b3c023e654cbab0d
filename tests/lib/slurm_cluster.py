"""What a Slurm test leaves behind and what the cluster says when a test waits too long."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def _out(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True).stdout


def cluster_says() -> str:
    """The queue with each job's state and reason, and the node's state: what a failed wait
    needs to be read."""
    if shutil.which("squeue") is None:
        return "(no Slurm client)"
    return ("queue:\n" + _out(["squeue", "-h", "-o", "%i %j %T %r %M %C"])
            + "nodes:\n" + _out(["sinfo", "-N", "-h", "-o", "%N %T %C %E"]))


def cancel_jobs_under(root: Path) -> None:
    """Cancel every job whose batch script lies under `root` (a test's tmp_path): a failed
    test's jobs must not hold the node while the next test waits for it."""
    if shutil.which("squeue") is None:
        return
    jobs = (line.partition("|") for line in _out(["squeue", "-h", "-o", "%i|%o"]).splitlines())
    left = [job for job, _, script in jobs if script.startswith(str(root))]
    if left:
        subprocess.run(["scancel", *left], capture_output=True)
