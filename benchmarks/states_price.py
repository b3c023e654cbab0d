"""How often two machine states are seen, by the price asked: python -m benchmarks.states_price

seq.states fits two clock states shared by every commit measured six times or more, and
believes them only where they beat one state by a log-likelihood ratio of
STATES_PRICE * log(runs) (and the other checks of seq._states). For each noise kind of
benchmarks.metric_verdicts and a few shapes of a session's runs (commits measured 30 and
30 times: two endpoints at --max-runs; five commits of six), this prints the share of
tries in which two states are seen, at each price: a one-state noise should almost never
pass, two states as often as possible. The commits lie 5% apart, as in the table.
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.lib.metric_sim import bimodal, lognormal, pareto, seen, sticky  # noqa: E402

KINDS = [("2% lognormal (one state)", lognormal(0.02)), ("Pareto (one state)", pareto(0.02)),
         ("bimodal, 10% apart", bimodal(0.02)), ("sticky, 10% apart", sticky(0.02)),
         ("lopsided, 15% of runs 6% slower", bimodal(0.003, 0.06, 0.15))]
SHAPES = [(30, 30), (20, 20), (10, 10), (6, 6, 6, 6, 6)]
PRICES = (2.0, 2.5, 3.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=400)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    print(f"two states seen, share of {args.tries} tries, by price (times log(runs))\n")
    print("| noise | runs of each commit | " + " | ".join(f"{p:g}" for p in PRICES) +
          " |\n|---|---|" + "---:|" * len(PRICES))
    for label, noise in KINDS:
        for shape in SHAPES:
            cells = [f"{seen(noise, shape, args.tries, random.Random(args.seed), p):.1%}"
                     for p in PRICES]
            print(f"| {label} | {', '.join(map(str, shape))} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
