"""Metric answers where a commit is a unit, not a run: python -m benchmarks.metric_units

Issue 52's findings on synthetic numbers, run exactly as the engine runs a metric
bisection (tests/lib/metric_sim.py `bisect_once`): per-commit build offsets (each interior
commit's speed times exp(N(0, sd)) in every run of it: code layout), spikes (10% of one
side's runs x1.5), a slow path in a minority of the new side's runs, and the nulls. Each
row: found (right), wrong `found`, ambiguous, exit 3 (and of those, how many tell of a
change in some runs only: metric/tails.py), and the median runs. Sessions of a
row run in parallel (--jobs), each from its own seed, so the figures do not depend on it.
--steps turns on the step check (metric/steps.py, Rule.steps), not yet the default.
"""
from __future__ import annotations

import argparse
import multiprocessing
import random
import statistics
import sys
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bisect_ngc.metric.comparator import Rule  # noqa: E402
from tests.lib.metric_sim import Noise, Trial, bisect_once, lognormal, spiky  # noqa: E402


def minority(sigma: float, share: float = 0.30, slower: float = 0.15) -> Noise:
    return lambda rng: rng.lognormvariate(0, sigma) * (1 + slower if rng.random() < share else 1.0)


# label -> (change, noise, new side's noise or None, per-commit offsets sd)
Row = tuple[float, Noise, "Noise | None", float]
ROWS: dict[str, Row] = {
    **{f"offsets sd {sd:.1%}, change {c:.0%}, 1% noise": (c, lognormal(0.01), None, sd)
       for sd in (0.005, 0.01, 0.015) for c in (0.03, 0.05)},
    "spikes on the old side (10% x1.5), 5%, 1% noise": (0.05, spiky(0.01), lognormal(0.01), 0.0),
    "spikes on the new side (10% x1.5), 5%, 1% noise": (0.05, lognormal(0.01), spiky(0.01), 0.0),
    "a slow path in 30% of new runs (+15%), 1% noise": (0.0, lognormal(0.01), minority(0.01), 0.0),
    "5% change, 1% noise (no offsets)": (0.05, lognormal(0.01), None, 0.0),
}
NULLS: dict[str, Row] = {
    "null, 1% noise, offsets sd 1%": (0.0, lognormal(0.01), None, 0.01),
    "null, 2% noise": (0.0, lognormal(0.02), None, 0.0),
}


def _one(job: tuple[str, int, int, int, bool]) -> Trial:
    label, seed, k, n, check = job
    change, noise, noise_new, sd = {**ROWS, **NULLS}[label]
    rng = random.Random(f"{seed}/{label}/{k}")
    changes = {} if label in NULLS else {rng.randrange(1, n): change}
    return bisect_once(n, changes, noise, Rule(steps=check), rng, offsets=sd,
                       noise_new=noise_new)


def table(sessions: int, nulls: int, n: int, seed: int, only: str, jobs: int,
          check: bool = False, out: Callable[[str], None] = print) -> None:
    out(f"{sessions} sessions a row ({nulls} a null) of {n} commits, seed {seed}"
        f"{', the step check on' if check else ''}\n")
    out("| scenario | sessions | found | wrong | ambiguous | exit 3 | of which: a change in "
        "some runs | runs, median |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    with multiprocessing.Pool(jobs) as pool:
        for label in [*ROWS, *NULLS]:
            if only not in label:
                continue
            count = nulls if label in NULLS else sessions
            if not count:
                continue
            trials = pool.map(_one, [(label, seed, k, n, check) for k in range(count)])
            null = label in NULLS           # there, every found is wrong
            right = "-" if null else str(sum(t.right for t in trials))
            wrong = sum(t.status == "found" if null else t.wrong for t in trials)
            out(f"| {label} | {count} | {right} | {wrong} | "
                f"{sum(t.status == 'ambiguous' for t in trials)} | "
                f"{sum(t.status == 'exit-3' for t in trials)} | "
                f"{sum(t.some_runs for t in trials)} | "
                f"{statistics.median(t.runs for t in trials):g} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--nulls", type=int, default=500)
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="", help="only the rows whose label has this text")
    ap.add_argument("--jobs", type=int, default=multiprocessing.cpu_count())
    ap.add_argument("--steps", action="store_true",
                    help="check each answer against each build's own speed (metric/steps.py)")
    args = ap.parse_args()
    table(args.sessions, args.nulls, args.n, args.seed, args.only, args.jobs, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
