"""What the belief's stated priors and --confidence cost and buy (docs/decisions.md, record
13): for each setting, the runs of a deterministic test against bisection's, and the wrong
answers of intermittent ones, on the belief alone (tests/lib/belief_sim.py: the judge's
rule, thousands of sessions a minute). The engine's own figures are in the accuracy
benchmark (`python -m benchmarks.accuracy --family intermittent`).

    python -m benchmarks.belief_priors                 # the grid below, 300 sessions a cell
    python -m benchmarks.belief_priors --sessions 50   # a quick look
"""
from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bisect_ngc.core.belief import Prior  # noqa: E402
from tests.lib.belief_sim import session  # noqa: E402

SETTINGS = [  # (P(deterministic), Beta of q, --confidence)
    (0.9, (2.0, 1.0), 0.99),
    (0.9, (2.0, 1.0), 0.999),
    (0.5, (2.0, 1.0), 0.99),
    (0.9, (1.0, 1.0), 0.999),
    (0.97, (2.0, 1.0), 0.999),
]
DETERMINISTIC = (32, 600)
FLAKY = [(0.9, 0.0), (0.7, 0.02), (0.5, 0.0), (0.3, 0.02)]


def row(det: float, shows: tuple[float, float], confidence: float, sessions: int,
        seed: int) -> list[str]:
    prior = Prior(deterministic=det, shows=shows)
    rng = random.Random(seed)
    cells = []
    for n in DETERMINISTIC:
        runs = [session(n, rng.randint(1, n - 1), 1.0, 0.0, rng, confidence, prior).runs
                for _ in range(max(10, sessions // 10))]
        cells.append(f"{statistics.median(runs):g} (+{statistics.median(runs) - math.ceil(math.log2(n)):g})")
    for q, eps in FLAKY:
        wrong = found = 0
        runs = []
        for _ in range(sessions):
            t = rng.randint(4, 28)
            s = session(32, t, q, eps, rng, confidence, prior)
            runs.append(s.runs)
            found += s.answer is not None and s.answer.change
            wrong += s.wrong(t)
        cells.append(f"{wrong}/{found} ({100 * wrong / sessions:.1f}%), {statistics.median(runs):g}")
    return [f"{det:g}", f"Beta{shows}", f"{confidence:g}", *cells]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=300, help="sessions per flaky cell")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    head = ["P(det)", "q prior", "confidence",
            *(f"deterministic n={n}: runs (over log2 n)" for n in DETERMINISTIC),
            *(f"q={q:g} eps={e:g}: wrong/found (of all), runs" for q, e in FLAKY)]
    print(f"Seed {args.seed}, {args.sessions} sessions a flaky cell (32 commits), "
          "`python -m benchmarks.belief_priors`.\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for det, shows, confidence in SETTINGS:
        print("| " + " | ".join(row(det, shows, confidence, args.sessions, args.seed)) + " |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
