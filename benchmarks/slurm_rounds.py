"""Slurm backend benchmarks on the dev cluster: python -m benchmarks.slurm_rounds

One scenario (a generated 400-commit repository, a 1 s test, two unbuildable stretches)
bisected with --jobs 1, 2, 4 and 8 through --backend slurm; for each: rounds, probes,
wall time, scheduler calls per minute while waiting, and from sacct the median time from
submission to start and from start to end of a test task, and the median round time.
Needs the cluster scripts/slurm-up.sh starts.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bisect_ngc.core.search import ceil_log  # noqa: E402
from bisect_ngc.core.keys import digest  # noqa: E402
from tests.lib.repos import BUILD, TEST, make_repo  # noqa: E402

N, T = 400, 271


def ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def run(tmp: Path, repo: Path, jobs: int) -> dict:
    state = tmp / f"st{jobs}"
    calls = tmp / f"calls{jobs}.log"
    env = dict(__import__("os").environ, BISECT_NGC_SLURM_CALL_LOG=str(calls))
    t0 = time.time()
    out = subprocess.run([sys.executable, "-m", "bisect_ngc", "bisect", "--repo", str(repo),
                          "--old", f"main~{N - 1}", "--new", "main", "--build", BUILD,
                          "--test", "sleep 1; " + TEST, "--backend", "slurm", "--partition",
                          "cpu", "--gpu-partition", "gpu", "--state", str(state), "--jobs",
                          str(jobs), "--json", "--quiet"], capture_output=True, text=True,
                         env=env)
    wall = time.time() - t0
    res = json.loads(out.stdout)
    lines = [line.split() for line in calls.read_text().splitlines()]
    polls = [float(t) for t, cmd in lines if cmd in ("squeue", "sacct")]
    per_min = len(polls) / max((polls[-1] - polls[0]) / 60, 1e-9) if len(polls) > 1 else 0
    name = f"bisect-ngc-test-{res['session']}-{digest(str(state.resolve()))[:6]}"
    time.sleep(2)
    acct = subprocess.run(["sacct", "-n", "-P", "-X", "--name", name, "-o",
                           "JobID,Submit,Start,End"], capture_output=True, text=True).stdout
    waits, runs, rounds = [], [], {}
    for line in acct.splitlines():
        job, submit, start, end = line.split("|")
        waits.append(ts(start) - ts(submit))
        runs.append(ts(end) - ts(start))
        rounds.setdefault(job.split("_")[0], []).append((ts(submit), ts(end)))
    round_times = [max(e for _, e in v) - min(s for s, _ in v) for v in rounds.values()]
    return {"jobs": jobs, "found": res["first_new"] is not None, "rounds": res["rounds"],
            "bound": ceil_log(N, jobs + 1) + 3, "probes": res["probes"], "wall": wall,
            "calls": len(lines), "polls_per_min": per_min,
            "submit_to_start": statistics.median(waits), "start_to_end":
            statistics.median(runs), "round": statistics.median(round_times)}


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        repo = tmp / "r"
        make_repo(repo, N, T, set(range(100, 110)) | set(range(300, 305)))
        rows = [run(tmp, repo, k) for k in (1, 2, 4, 8)]
    print(f"\n{N} commits, transition at {T}, unbuildable 100-109 and 300-304, test 1 s\n")
    print("| --jobs | rounds (bound) | probes | wall (s) | median round (s) | test task: submit→start (s) | start→end (s) | scheduler calls | squeue/sacct per min |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['jobs']} | {r['rounds']} ({r['bound']}) | {r['probes']} | {r['wall']:.1f} | "
              f"{r['round']:.1f} | {r['submit_to_start']:.1f} | {r['start_to_end']:.1f} | "
              f"{r['calls']} | {r['polls_per_min']:.1f} |")


if __name__ == "__main__":
    main()
