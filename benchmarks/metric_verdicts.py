"""The metric comparator on synthetic distributions: python -m benchmarks.metric_verdicts

Each trial bisects n candidates whose metric is lognormal noise around 1.0, shifted by
`change` from a random culprit on; the comparator (bisect_ngc/comparator.py) and the pure
search run exactly as the engine runs them (a round is `block` runs of each commit asked
for). Prints, per setting: how often the culprit was found, how often a wrong commit was
named, how often the endpoints were called "same", the runs per probe (those the search
asked for, median) and the runs per bisection (with the runs of the interval's ends that
each round measures beside the probed commit, as references taken at the same time).
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bisect_ngc.comparator import Rule, companions, confirm, judge  # noqa: E402
from bisect_ngc.search import Result, Status, next_step  # noqa: E402


@dataclass
class Trial:
    status: str
    first_new: int | None
    culprit: int | None
    runs: dict[int, int]       # every run of each commit, as a reference of others too
    own: dict[int, int]        # the runs each commit got when the search asked for it

    @property
    def right(self) -> bool:
        return self.status == "found" and self.first_new == self.culprit

    @property
    def wrong(self) -> bool:
        return self.status == "found" and self.first_new != self.culprit


def bisect_once(n: int, change: float, noise: float, rule: Rule, rng: random.Random,
                culprit: int | None = None, drift: float = 0.0) -> Trial:
    """One bisection; change 0.0 is a null history (no culprit). `drift`: the machine's
    speed takes a random step of this size (lognormal sigma) before each round."""
    if change and culprit is None:
        culprit = rng.randrange(1, n)
    level = {i: 1.0 + (change if culprit is not None and i >= culprit else 0.0)
             for i in range(n)}
    samples: dict[int, list[tuple[int, float]]] = {}
    attempts: dict[int, int] = {}
    own: dict[int, int] = {}
    machine, rnd = 1.0, 0

    def measure(asked, indices) -> None:
        nonlocal machine, rnd
        rnd += 1
        for i in asked:
            own[i] = own.get(i, 0) + rule.block
        machine *= rng.lognormvariate(0, drift) if drift else 1.0
        for _ in range(rule.block):           # interleaved, as the engine runs them
            for i in indices:
                value = machine * level[i] * rng.lognormvariate(0, noise)
                samples.setdefault(i, []).append((rnd, value))
                attempts[i] = attempts.get(i, 0) + 1

    while True:
        j = judge(n, samples, attempts, rule)
        if j.more:
            measure(j.more, companions(j.more, j.verdicts, n))
            continue
        if j.difference is None or j.difference.call != "differ":
            return Trial("no-change", None, culprit, attempts, own)
        step = next_step(n, j.verdicts)
        if isinstance(step, Result):
            step = confirm(step, samples, attempts, rule)
            if isinstance(step, tuple):
                measure(step, companions(step, j.verdicts, n))
                continue
            first = step.first_new if step.status is Status.FOUND else None
            return Trial(step.status.value, first, culprit, attempts, own)
        measure(step.indices, companions(step.indices, j.verdicts, n))


def summary(trials: list[Trial]) -> dict[str, float]:
    per_probe = [r for t in trials for r in t.own.values()]
    total = [sum(t.runs.values()) for t in trials]
    return {"found": sum(t.right for t in trials) / len(trials),
            "wrong": sum(t.wrong for t in trials) / len(trials),
            "no_change": sum(t.status == "no-change" for t in trials) / len(trials),
            "runs_median": statistics.median(per_probe),
            "runs_max": max(per_probe), "runs_total_median": statistics.median(total)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rule = Rule()
    print(f"rule: p {rule.p}, min change {rule.min_change:.0%}, block {rule.block}, max runs "
          f"{rule.max_runs}; {args.trials} trials of {args.n} candidates each")
    for change, noise, drift in [(0.0, 0.02, 0), (0.0, 0.10, 0), (0.0, 0.02, 0.03),
                                 (0.05, 0.02, 0), (0.10, 0.03, 0), (0.03, 0.01, 0),
                                 (0.08, 0.05, 0), (0.08, 0.05, 0.03), (0.02, 0.002, 0)]:
        rng = random.Random(args.seed)
        s = summary([bisect_once(args.n, change, noise, rule, rng, drift=drift)
                     for _ in range(args.trials)])
        print(f"change {change:4.0%} noise {noise:5.1%} drift {drift:4.0%}: found "
              f"{s['found']:.3f}, wrong culprit {s['wrong']:.3f}, 'no change' "
              f"{s['no_change']:.3f}, runs per probe (its own) median {s['runs_median']:g} "
              f"max {s['runs_max']}, runs per bisection (references included) median "
              f"{s['runs_total_median']:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
