"""Simulated measurements for the metric tests and benchmarks: noise kinds (lognormal,
Pareto, two clock states at random or sticky), one bisection on synthetic numbers run
exactly as the engine runs it (`bisect_once`, a round is segments.passes), the oracle that
knows both distributions (`oracle_runs`), how often seq.states sees two states at a price
(`at_price`, `seen`), and confirm() of a pair (`confirm_pair`)."""
from __future__ import annotations

import contextlib
import math
import random
import statistics
from dataclasses import dataclass
from typing import Callable, Iterator

from bisect_ngc.core.search import Result, Status, next_step
from bisect_ngc.metric import sequential as seq
from bisect_ngc.metric.comparator import Rule
from bisect_ngc.metric.segments import passes, plan

Noise = Callable[[random.Random], float]


def lognormal(sigma: float) -> Noise:
    return lambda rng: rng.lognormvariate(0, sigma)


def pareto(sigma: float) -> Noise:
    """Mostly tight (sigma/4), and now and then much slower (a Pareto tail)."""
    return lambda rng: rng.lognormvariate(0, sigma / 4) * (1 + sigma * (rng.paretovariate(2.5) - 1))


def bimodal(sigma: float, gap: float = 0.10, upper: float = 0.5) -> Noise:
    """Two clock states `gap` apart, a run in the upper one with probability `upper`."""
    return lambda rng: rng.lognormvariate(0, sigma) * (1 + gap if rng.random() < upper else 1.0)


def spiky(sigma: float, share: float = 0.10, factor: float = 1.5) -> Noise:
    """A run `factor` times slower with probability `share`: a noisy neighbour, a page fault."""
    return lambda rng: rng.lognormvariate(0, sigma) * (factor if rng.random() < share else 1.0)


def sticky(sigma: float, gap: float = 0.10, switch: float = 0.1) -> Noise:
    """Two clock states `gap` apart that stick: the machine changes state before a run with
    probability `switch`, so runs close in time share a state."""
    state = [False]

    def draw(rng: random.Random) -> float:
        state[0] ^= rng.random() < switch
        return rng.lognormvariate(0, sigma) * (1 + gap if state[0] else 1.0)
    return draw


@dataclass
class Trial:
    status: str
    first_new: int | None
    culprits: tuple[int, ...]
    runs: int
    named: tuple[int, ...] = ()       # every change found
    phases: tuple[int, ...] = ()      # runs: PHASES, in that order
    some_runs: bool = False           # exit 3 telling of a change in some runs only

    @property
    def all_named(self) -> bool:
        return self.status == "found" and set(self.named) == set(self.culprits)

    @property
    def right(self) -> bool:
        return self.status == "found" and self.first_new in self.culprits

    @property
    def wrong(self) -> bool:
        return self.status == "found" and not set(self.named) <= set(self.culprits)


def bisect_once(n: int, changes: dict[int, float], noise: Noise, rule: Rule,
                rng: random.Random, drift: float = 0.0, offsets: float = 0.0,
                noise_new: Noise | None = None) -> Trial:
    """One bisection; `changes`: culprit index -> relative change from there on (none: a
    null history). `drift`: the machine's speed takes a lognormal step before each run.
    `offsets`: each interior commit's build has its own speed, exp(N(0, offsets)), in
    every run of it (code layout). `noise_new`: the noise of the commits from the first
    change on (a slow path they take in some runs), where it differs."""
    level = [math.prod(1 + c for k, c in changes.items() if i >= k) for i in range(n)]
    if offsets:
        level = [lv * (rng.lognormvariate(0, offsets) if 0 < i < n - 1 else 1.0)
                 for i, lv in enumerate(level)]
    first = min(changes, default=n)
    draw = [noise_new if noise_new is not None and i >= first else noise for i in range(n)]
    samples: dict[int, list[tuple[int, float]]] = {}
    attempts: dict[int, int] = {}
    state = {"machine": 1.0, "round": 0, "runs": 0}
    by = dict.fromkeys(PHASES, 0)

    def run(i: int) -> None:
        state["machine"] *= rng.lognormvariate(0, drift) if drift else 1.0
        samples.setdefault(i, []).append(
            (state["round"], state["machine"] * level[i] * draw[i](rng)))
        attempts[i] = attempts.get(i, 0) + 1
        state["runs"] += 1

    def measure(asked: tuple[int, ...], verdicts, phase: str) -> None:
        state["round"] += 1
        for todo in passes(asked, verdicts, n, samples, attempts, rule):
            for i in todo:
                run(i)
                by[phase if phase != "asked" or i in asked else "guards"] += 1

    culprits = tuple(sorted(changes))
    while True:
        p = plan(n, samples, attempts, rule)
        if p.more or p.step:
            measure(p.more or p.step, p.verdicts,
                    "asked" if p.step else "more" if by["asked"] else "endpoints")
            continue
        if p.result is None:
            return Trial("exit-3", None, culprits, state["runs"], phases=tuple(by.values()),
                         some_runs=p.tail is not None)
        first = p.result.first_new if p.result.status is Status.FOUND else None
        return Trial(p.result.status.value, first, culprits, state["runs"],
                     tuple(hi for _, hi in p.changes), tuple(by.values()))


# Where a session's runs go: the endpoints until they differ; the commits the search asks
# for; the drift guards of those rounds (the open interval's ends); every later round's
# ("more": an undecided commit's runs, the answer's fresh check).
PHASES = ("endpoints", "asked", "guards", "more")


def oracle_runs(n: int, change: float, noise: Noise, rule: Rule, rng: random.Random,
                culprit: int, states: seq.States | None = None) -> int:
    """The same search with each commit decided by the same SPRT (the search's error rate)
    against the two known distributions (their medians and noise known, two clock states
    known where there are two, no endpoints to establish, no answer to check): the floor."""
    draws = sorted(math.log(noise(rng)) for _ in range(4001))
    mid = draws[2000]
    s = seq.MAD_TO_SIGMA * statistics.median(abs(d - mid) for d in draws)
    lo, hi = (0.0, math.log1p(change)) if states else (mid, mid + math.log1p(change))
    verdicts, runs = {}, 0
    from bisect_ngc.core.search import Verdict
    verdicts[0], verdicts[n - 1] = Verdict.PASS, Verdict.FAIL
    while not isinstance(step := next_step(n, verdicts), Result):
        for i in step.indices:
            total = 0.0
            while abs(total) < seq.wald(rule.search_alpha):
                x = math.log(noise(rng)) + (math.log1p(change) if i >= culprit else 0.0)
                total += seq.mixed_llr(x, lo, hi, states) if states else seq.llr(x, lo, hi, s)
                runs += 1
            verdicts[i] = Verdict.FAIL if total > 0 else Verdict.PASS
    return runs


@contextlib.contextmanager
def at_price(price: float | None) -> Iterator[None]:
    """seq.states at `price` (None: its own) inside, and as it was after."""
    kept = seq.STATES_PRICE
    seq.STATES_PRICE = kept if price is None else price
    seq._states.cache_clear()           # its answers were found at another price
    try:
        yield
    finally:
        seq.STATES_PRICE = kept
        seq._states.cache_clear()


def seen(noise, shape: tuple[int, ...], tries: int, rng: random.Random,
         price: float | None = None) -> float:
    """The share of tries in which seq.states sees two states: commits 5% apart, each
    measured as often as `shape` says; at `price`, else at seq.STATES_PRICE."""
    with at_price(price):
        return sum(seq.states([[math.log(noise(rng)) + 0.05 * j for _ in range(k)]
                               for j, k in enumerate(shape)]) is not None
                   for _ in range(tries)) / tries


def confirm_pair(lo: int, hi: int, samples):
    """confirm() of the pair (lo, hi), every commit up to lo called like old, the rest new."""
    from bisect_ngc.core.search import Result, Status, Verdict
    from bisect_ngc.metric.confirmation import confirm
    verdicts = {i: Verdict.PASS if i <= lo else Verdict.FAIL for i in samples}
    attempts = {i: len(s) for i, s in samples.items()}
    return confirm(Result(Status.FOUND, last_old=lo, first_new=hi), samples, attempts, Rule(),
                   verdicts)
