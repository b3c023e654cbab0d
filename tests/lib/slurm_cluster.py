"""The single-node cluster the Slurm tests use (scripts/slurm-up.sh): whether it answers
(PROBLEM), controller runs that end or fail with what the queue says, what a test leaves
behind, and the jobs a session submitted."""
from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bisect_ngc.core.keys import digest
from bisect_ngc.core.store import Store


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


def _cluster_problem() -> str | None:
    if shutil.which("sbatch") is None:
        return "no Slurm client here; run scripts/slurm-up.sh"
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True)
    if ping.returncode != 0 or "UP" not in ping.stdout:
        return "no slurmctld answering; run scripts/slurm-up.sh"
    parts = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True).stdout
    if "gpu" not in parts:
        return "the cluster lacks the gpu partition scripts/slurm-up.sh makes"
    return None


PROBLEM = _cluster_problem()


_skip_without_cluster = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")


def needs_slurm(test):
    return pytest.mark.slurm(_skip_without_cluster(test))


def my_jobs(session: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i|%j"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if session in line]


def submitted_tests(tmp: Path, session: str) -> dict[str, int]:
    """commit -> how many test tasks sacct saw for each of its probes (1: one submission
    each; a commit the belief ran k times fresh has k probes, each its own task). Each
    task's output file names its job and index, and the test script of that round lists
    the commits by index."""
    name = f"bisect-ngc-test-{session}-{state_tag(tmp)}"
    rounds = tmp / "st" / "slurm" / "rounds" / session
    store = Store(tmp / "st")
    ran = sum(1 for p in store.probes(session) if not p.cached) + len(store.checks(session))
    end = time.monotonic() + 30
    while True:   # slurmdbd records jobs a moment after they end
        tasks = subprocess.run(["sacct", "-n", "-P", "-X", "--name", name, "-o", "JobID"],
                               capture_output=True, text=True).stdout.split()
        outs = [next(rounds.glob(f"*/slurm-test-{t}.out"), None) for t in tasks]
        if (len(tasks) >= ran and all(outs)) or time.monotonic() > end:
            break
        time.sleep(0.5)
    counts: dict[str, int] = {}
    for task, out in zip(tasks, outs):
        assert out is not None, f"no output file for test task {task}"
        commits = re.search(r"^COMMITS=\((.*)\)$", (out.parent / "test.sh").read_text(),
                            re.M).group(1).split()
        commit = commits[int(task.split("_")[1])]
        counts[commit] = counts.get(commit, 0) + 1
    for check in store.checks(session):   # the answer's fresh re-runs: submissions of their own
        counts[check.commit] -= 1
    for p in store.probes(session):       # a probe after the first of its commit
        if not p.cached:
            counts[p.commit] = counts.get(p.commit, 0) - 1
    return {commit: k + 1 for commit, k in counts.items() if k + 1}


def kill_after_two_rounds_and_rerun(argv: list[str], state: Path,
                                    wait: float) -> subprocess.CompletedProcess:
    """Run the controller, SIGKILL it once its second round is submitted, run it again."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + wait
    store = Store(state)

    def submitted_rounds() -> int:
        latest = store.latest()
        return len({j.test_job for j in store.slurm_jobs(latest.id).values()
                    if j.test_job}) if latest else 0

    while submitted_rounds() < 2:
        assert time.monotonic() < end and proc.poll() is None
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return run_to_end(argv, 300)


def run_to_end(argv: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    """One controller run; one that outlives `timeout` fails with what the queue says."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        pytest.fail(f"the run did not end in {timeout} s\nstderr:\n{err}\n{cluster_says()}")


def state_tag(tmp: Path) -> str:
    """Ends the names of the jobs of the state directory tmp/st."""
    return digest(str((tmp / "st").resolve()))[:6]
