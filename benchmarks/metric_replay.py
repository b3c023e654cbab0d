"""Replay recorded runs through the metric comparator: python -m benchmarks.metric_replay RUNS

RUNS is a `metric_gpu_*_runs.txt` that benchmarks/metric_gpu.sh wrote (round, commit index,
number, ... per line, in the order the runs were taken). The numbers are fed one by one to
segments.plan, as the engine feeds them, and the replay stops at the first run after which
the plan asks for nothing more: how many of those runs today's rule needed. It shows what
a rule change does to a GPU session without the GPU; it is exact only while today's rule
asks for the same commits in the same order as the recorded session did up to there.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bisect_ngc.metric.comparator import Rule  # noqa: E402
from bisect_ngc.metric.segments import plan  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path)
    ap.add_argument("--n", type=int, default=8, help="commits, endpoints included")
    ap.add_argument("--runs-per-round", type=int, default=5)
    ap.add_argument("--max-runs", type=int, default=10)
    args = ap.parse_args()
    rule = Rule(block=args.runs_per_round, max_runs=args.max_runs)
    samples: dict[int, list[tuple[int, float]]] = {}
    attempts: dict[int, int] = {}
    lines = [line.split() for line in args.runs.read_text().splitlines() if line.strip()]
    for k, (rnd, idx, value, *_) in enumerate(lines, 1):
        i = int(idx)
        samples.setdefault(i, []).append((int(rnd), float(value)))
        attempts[i] = attempts.get(i, 0) + 1
        p = plan(args.n, samples, attempts, rule)
        if not p.more and not p.step:
            what = p.result.status.value if p.result else "endpoints: " + p.difference.call
            named = [hi for _, hi in p.changes]
            print(f"done after run {k} of {len(lines)} (round {rnd}): {what}, changes at {named}")
            return 0
    print(f"still asking after all {len(lines)} recorded runs: more {p.more}, step {p.step}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
