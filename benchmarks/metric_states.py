"""A second clock state as far off as the change: python -m benchmarks.metric_states

Six scenarios of 32 commits where a run in the second state reads exactly like the other
side: states 5% apart and a 5% change (either way), at 0.3-0.5% noise. *sticky*: the
machine switches state before 1 run in 10; *sticky, uneven*: it enters the slow state
before 1 run in 20 and leaves it before 3 in 10; *random 15%*: each run is slow with
probability 0.15. Each session has its own seed, crc32(scenario) * 1000 + trial (the
sessions tests/metric/test_states.py replays), and runs as benchmarks.metric_verdicts
runs them. Prints found, ambiguous, exit 3, wrong and the median runs per scenario.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.metric_verdicts import Noise, bimodal, bisect_once, sticky  # noqa: E402
from bisect_ngc.metric.comparator import Rule  # noqa: E402


def sticky_uneven(sigma: float, gap: float, enter: float, leave: float) -> Noise:
    """Two states `gap` apart: the machine enters the upper one before a run with
    probability `enter` and leaves it with probability `leave`."""
    state = [False]

    def draw(rng: random.Random) -> float:
        state[0] = rng.random() >= leave if state[0] else rng.random() < enter
        return rng.lognormvariate(0, sigma) * (1 + gap if state[0] else 1.0)
    return draw


SCENARIOS = {   # name: (a fresh noise maker, the change)
    "sticky_p5": (lambda: sticky(0.005, 0.05, 0.1), 0.05),
    "sticky_m5": (lambda: sticky(0.005, 0.05, 0.1), -0.05),
    "sticky_lop_p5": (lambda: sticky_uneven(0.003, 0.05, 0.05, 0.30), 0.05),
    "sticky_lop_m5": (lambda: sticky_uneven(0.003, 0.05, 0.05, 0.30), -0.05),
    "bimodal_lop_p5": (lambda: bimodal(0.003, 0.05, 0.15), 0.05),
    "bimodal_lop_m5": (lambda: bimodal(0.003, 0.05, 0.15), -0.05),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--only", default="", help="run only the scenarios whose name has this")
    args = ap.parse_args()
    print("| scenario | found | ambiguous | exit 3 | wrong | runs, median |\n"
          "|---|---:|---:|---:|---:|---:|")
    for name, (noise, change) in SCENARIOS.items():
        if args.only not in name:
            continue
        trials = []
        for i in range(args.trials):
            rng = random.Random(zlib.crc32(name.encode()) * 1000 + i)
            at = rng.sample(range(1, 32), 1)[0]
            trials.append(bisect_once(32, {at: change}, noise(), Rule(), rng))
            if trials[-1].wrong:
                print(f"  {name} trial {i}: culprit {at}, named {trials[-1].named}", flush=True)
        row = [sum(t.right for t in trials), sum(t.status == "ambiguous" for t in trials),
               sum(t.status == "exit-3" for t in trials), sum(t.wrong for t in trials),
               statistics.median(t.runs for t in trials)]
        print(f"| {name} | " + " | ".join(str(v) for v in row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
