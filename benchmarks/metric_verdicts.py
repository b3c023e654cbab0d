"""The metric comparator on synthetic distributions: python -m benchmarks.metric_verdicts

Each trial bisects n candidates whose metric is 1.0 times noise, with a change from a
culprit on (or two); the comparator (bisect_ngc/metric/comparator.py) and the pure search run
exactly as the engine runs them: a round is segments.passes, up to `block` passes, one run
of each commit a pass, each end of the open interval once in the first pass (the drift
guard), later passes only the round's commits still asked for. Noise kinds: lognormal;
Pareto (heavy-tailed: a run is slower by a Pareto-distributed amount); bimodal (two clock
states 10% apart, each run in one at random); drift (the machine's speed takes a lognormal
step before every run). Prints per row: found, ambiguous, exit 3 (no change / inconclusive
/ invalid), wrong (a named commit that is no culprit), the median runs per bisection, and
for the clean rows an oracle's: the same search with the same SPRT, but both distributions
known. With --phases, then where those rows' runs went (PHASES): the oracle pays only for
what the search asks.
"""
from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bisect_ngc.metric import sequential as seq  # noqa: E402
from bisect_ngc.metric.comparator import Rule  # noqa: E402
from tests.lib.metric_sim import (PHASES, bimodal, bisect_once, lognormal,  # noqa: E402
                                  oracle_runs, pareto, sticky)

ROWS = [   # (label, changes as fractions of n or absolute, noise, drift)
    ("5% change, 2% lognormal noise", [0.05], lognormal(0.02), 0.0),
    ("5%, Pareto (heavy-tailed) noise", [0.05], pareto(0.02), 0.0),
    ("5%, bimodal noise (two clock states 10% apart)", [0.05], bimodal(0.02), 0.0),
    ("5%, drift 0.2% per run", [0.05], lognormal(0.02), 0.002),
    ("5%, drift 0.5% per run (a 9% walk over a session)", [0.05], lognormal(0.02), 0.005),
    ("3% change, 3% noise", [0.03], lognormal(0.03), 0.0),
    ("two +5% changes in one range", [0.05, 0.05], lognormal(0.02), 0.0),
    ("2.25%, 0.05% noise (the H200's repro --measure)", [0.0225], lognormal(0.0005), 0.0),
    ("5%, sticky clock states 10% apart (switch 1 run in 10)", [0.05], sticky(0.02), 0.0),
    ("5%, lopsided clock states (15% of runs 6% slower, 0.3% noise)", [0.05],
     bimodal(0.003, 0.06, 0.15), 0.0),
]
STATEFUL = {"sticky", "lopsided"}     # no oracle: it knows no state that changes or leans
NULLS = [("null, 2% lognormal", lognormal(0.02), 0.0), ("null, Pareto", pareto(0.02), 0.0),
         ("null, bimodal", bimodal(0.02), 0.0), ("null, drift 0.2%/run", lognormal(0.02), 0.002),
         ("null, sticky clock states", sticky(0.02), 0.0)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--nulls", type=int, default=125, help="null sessions per noise kind")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="", help="run only the rows whose label has this text")
    ap.add_argument("--max-runs", type=int, default=Rule.max_runs)
    ap.add_argument("--runs-per-round", type=int, default=Rule.block)
    ap.add_argument("--phases", action="store_true",
                    help="then, for the rows with an oracle, the median runs of each phase")
    args = ap.parse_args()
    rule = Rule(block=args.runs_per_round, max_runs=args.max_runs)
    print(f"rule: p {rule.p}, min change {rule.min_change:.0%}, up to {rule.block} runs a "
          f"round, max runs {rule.max_runs}; {args.trials} trials of {args.n} commits\n")
    print("| scenario | found | both named | ambiguous | exit 3 | wrong | runs, median | "
          "oracle runs, median |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    phased = []
    for label, sizes, noise, drift in ROWS:
        if args.only not in label:
            continue
        rng = random.Random(args.seed)
        trials, oracle = [], []
        for _ in range(args.trials):
            at = sorted(rng.sample(range(1, args.n), len(sizes)))
            t = bisect_once(args.n, dict(zip(at, sizes)), noise, rule, rng, drift)
            trials.append(t)
            if len(sizes) == 1 and not drift and not STATEFUL & set(label.split()):
                oracle.append(oracle_runs(args.n, sizes[0], noise, rule, rng, at[0],
                                          seq.States(math.log(1.1), 0.5, 0.02)
                                          if "bimodal" in label else None))
        row = [sum(t.right for t in trials),
               sum(t.all_named for t in trials) if len(sizes) > 1 else "-",
               sum(t.status == "ambiguous" for t in trials),
               sum(t.status == "exit-3" for t in trials), sum(t.wrong for t in trials),
               statistics.median(t.runs for t in trials),
               statistics.median(oracle) if oracle else "-"]
        print(f"| {label} | " + " | ".join(str(v) for v in row) + " |")
        if oracle:
            phased.append((label, [statistics.median(t.phases[k] for t in trials)
                                   for k in range(len(PHASES))], statistics.median(oracle)))
    for label, noise, drift in NULLS:
        if args.only not in label or not args.nulls:
            continue
        rng = random.Random(args.seed)
        trials = [bisect_once(args.n, {}, noise, rule, rng, drift) for _ in range(args.nulls)]
        print(f"| {label} ({args.nulls} sessions) | - | - | "
              f"{sum(t.status == 'ambiguous' for t in trials)} | "
              f"{sum(t.status == 'exit-3' for t in trials)} | "
              f"{sum(t.status == 'found' for t in trials)} | "
              f"{statistics.median(t.runs for t in trials):g} | - |")
    if args.phases and phased:
        print("\n| scenario | " + " | ".join(PHASES) + " | oracle |\n|---|" + "---:|" * 5)
        for label, cells, floor in phased:
            print(f"| {label} | " + " | ".join(f"{v:g}" for v in cells) + f" | {floor:g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
