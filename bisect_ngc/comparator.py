"""Metric verdicts: samples of a measurement in, "like old", "like new", "like neither" or
"unknown" out.

Pure, beside the search. A bisection on a metric first asks whether its two endpoints
differ at all (`endpoints`): the (1 - alpha) interval of the relative change must lie
beyond +-min_change ("differ"), or inside it ("same"). The k-th look at a pair spends
alpha = p / (k (k + 1)), so any number of looks keeps the false-difference rate at most p.
Then each commit is a question with two answers, like old or like new (`classify`):
Wald's sequential probability ratio test over its runs (sequential.py), at error rates p
both ways, so one run decides when the sides lie far apart, and a commit whose numbers lie
far from both sides is "like neither" (the change is spread over several commits), never
forced into a side. `judge` turns all the samples into the search's verdicts plus the
commits that need more runs, correcting each round's numbers by the drift its interleaved
reference runs show. Every decision is a function of the samples as multisets of
(round, number), so the order in which runs arrive never changes an answer.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from enum import Enum
from typing import Collection, Mapping, Sequence

from . import sequential as seq
from .search import Result, Status, Verdict, open_interval


class Call(str, Enum):
    LIKE_OLD = "like-old"
    LIKE_NEW = "like-new"
    NEITHER = "like-neither"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Rule:
    p: float = 0.01              # the false-difference rate allowed over all looks
    min_change: float = 0.02     # relative; smaller differences are "no change"
    block: int = 5               # runs a commit gets per round at most
    max_runs: int = 30           # per commit; past it an unknown is unresolved
    lower_is_better: bool = True

    def __post_init__(self):
        if not 0 < self.p < 1:
            raise ValueError("the p threshold must lie between 0 and 1")
        if self.min_change < 0:
            raise ValueError("the minimum change must not be negative")
        if self.block < 2 or self.max_runs < self.block:
            raise ValueError("runs per round must be >= 2 and max runs >= runs per round")

    def alpha(self, look: int = 1) -> float:
        """The threshold of the look-th look at one pair: p / (look (look + 1)), which sums
        to p over any number of looks."""
        return self.p / (look * (look + 1))


@dataclass(frozen=True)
class Shift:
    """How far `b` lies from `a`, relative to a's median: the Hodges-Lehmann estimate of
    the shift and its distribution-free confidence interval (from the Mann-Whitney U
    distribution, normal approximation)."""

    change: float
    low: float
    high: float
    confidence: float


@dataclass(frozen=True)
class Difference:
    call: str                    # "differ" | "same" | "unknown"
    p: float
    shift: Shift
    n_old: int
    n_new: int

    def describe(self, rule: Rule) -> str:
        s = self.shift
        return (f"{s.change:+.2%} (the {s.confidence * 100:.4g}% interval {s.low:+.2%} .. "
                f"{s.high:+.2%}; p = {self.p:.2g} from {self.n_old} and {self.n_new} runs; "
                f"a change counts when significant and at least {rule.min_change:.1%} with "
                f"{SIZE_CONFIDENCE:.0%} confidence)")


# Runs of each endpoint before any call: a spread needs a few numbers to be believed.
ENDPOINT_RUNS = 3
# The confidence with which a change must be at least --min-change (one-sided).
SIZE_CONFIDENCE = 0.95


def looks(max_runs: int) -> list[int]:
    """The sample sizes at which a pair is looked at: from ENDPOINT_RUNS on, about half as
    many again each time, and max_runs last. Few looks keep each one's threshold mild."""
    sizes, n = [], ENDPOINT_RUNS
    while n < max_runs:
        sizes.append(n)
        n = max(n + 1, round(n * 1.5))
    return sizes + [max_runs]


def endpoints(old: Sequence[float], new: Sequence[float], rule: Rule) -> Difference:
    """Do two samples differ? They are looked at when the smaller reaches a size of
    `looks`; the k-th look tests at `rule.alpha(k)`. "differ": significant there, and at
    least min_change with 95% confidence (the 90% interval lies beyond +-min_change);
    "same": that interval lies inside +-min_change; "unknown": not a look, or more runs
    may tell (at max_runs, inconclusive)."""
    n = min(len(old), len(new))
    sizes = looks(max(n, rule.max_runs)) if n > rule.max_runs else looks(rule.max_runs)
    look = sizes.index(n) + 1 if n in sizes else max(1, sum(1 for k in sizes if k <= n))
    alpha = rule.alpha(look)
    positive = min(min(old), min(new)) > 0
    a, b = seq.scaled(old, positive), seq.scaled(new, positive)
    base = statistics.median(old)
    rel = lambda v: seq.relative(v, base, positive)        # noqa: E731
    delta, low, high, p = seq.interval(a, b, alpha)
    _, small, large, _ = seq.interval(a, b, 2 * (1 - SIZE_CONFIDENCE))
    m = rule.min_change
    if n not in sizes:
        call = "unknown"
    elif p <= alpha and (rel(small) >= m or rel(large) <= -m):
        call = "differ"
    elif -m < rel(small) and rel(large) < m:
        call = "same"
    else:
        call = "unknown"
    return Difference(call, p, Shift(rel(delta), rel(low), rel(high), 1 - alpha), len(old),
                      len(new))


def classify(x: Sequence[float], old: Sequence[float], new: Sequence[float],
             rule: Rule) -> Call:
    """Like old or like new by the sequential test at error rates p, when the commit's
    median also lies near that side (within a quarter of the shift, or four noise widths);
    like neither when three or more runs differ from both sides at p and lie a quarter of
    the shift or more from each; unknown while neither holds. All three samples on one
    scale (see judge)."""
    if not x or not old or not new:
        return Call.UNKNOWN
    lo_loc, hi_loc = statistics.median(old), statistics.median(new)
    s = seq.noise([old, new, x])
    near = max(4 * s, abs(hi_loc - lo_loc) / 4)
    mid = statistics.median(x)
    total = sum(seq.llr(v, lo_loc, hi_loc, s) for v in x)
    bound = seq.wald(rule.p)
    if total >= bound and abs(mid - hi_loc) <= near:
        return Call.LIKE_NEW
    if total <= -bound and abs(mid - lo_loc) <= near:
        return Call.LIKE_OLD
    if len(x) >= ENDPOINT_RUNS and min(abs(mid - lo_loc), abs(mid - hi_loc)) >= \
            abs(hi_loc - lo_loc) / 4 and \
            all(seq.interval(side, x, rule.p)[3] <= rule.p for side in (old, new)):
        return Call.NEITHER
    return Call.UNKNOWN


# A sample: (the round it was measured in, the number). Runs of one round are interleaved,
# so numbers of one round share the machine's state; comparisons use them together.
Sample = Sequence[tuple[int, float]]


def numbers(sample: Sample, rounds: Collection[int] | None = None) -> list[float]:
    return [v for r, v in sample if rounds is None or r in rounds]


def together(a: Sample, b: Sample) -> tuple[list[float], list[float]]:
    """a's and b's numbers from the rounds that measured both (all of them if none did)."""
    common = {r for r, _ in a} & {r for r, _ in b}
    if not common:
        return numbers(a), numbers(b)
    return numbers(a, common), numbers(b, common)


def companions(step: Sequence[int], verdicts: Mapping[int, Verdict], n: int) -> tuple[int, ...]:
    """What a round measures: the commits the search asks for, interleaved with the two ends
    of the interval still open (already known like old and like new), so each commit is
    compared with numbers taken at the same time, not before the machine drifted."""
    lo, hi = open_interval(n, verdicts) if 0 in verdicts and n - 1 in verdicts else (0, n - 1)
    ends = [i for i in (lo, hi) if verdicts.get(i) in (Verdict.PASS, Verdict.FAIL)]
    return tuple(sorted(set(step) | set(ends)))


@dataclass(frozen=True)
class Judgement:
    """What the samples say now: the search's verdicts (old endpoint PASS, new FAIL), the
    commits that need another block of runs, and the endpoints' difference once known."""

    verdicts: dict[int, Verdict] = field(default_factory=dict)
    more: tuple[int, ...] = ()
    difference: Difference | None = None
    calls: dict[int, Call] = field(default_factory=dict)


# Runs of one commit that may end with no number (a crash, a missing line) before it
# counts as untestable: a run without a number is tried again, not forever.
NO_NUMBER_TRIES = 3


def settled(n: int, samples: Mapping[int, Sample], rule: Rule) -> Difference | None:
    """The endpoints' difference as first decided, round by round: once they differ, they
    differ for the rest of the session (later looks do not undo the search)."""
    ends = (samples.get(0, ()), samples.get(n - 1, ()))
    for r in sorted({r for side in ends for r, _ in side}):
        upto = [[(k, v) for k, v in side if k <= r] for side in ends]
        if all(upto):
            diff = endpoints(*together(*upto), rule)
            if diff.call == "differ":
                return diff
    return None


def judge(n: int, samples: Mapping[int, Sample], attempts: Mapping[int, int],
          rule: Rule, decided: Difference | None = None) -> Judgement:
    """`samples[i]`: what was measured at candidate i; `attempts[i]`: its runs so far, the
    failed ones included; `decided`: the endpoints' difference once made (`settled`). A
    commit with no number after NO_NUMBER_TRIES runs is a skip; one still unknown at
    max_runs is unresolved (a skip that keeps its numbers). A commit is compared with the
    numbers of the commits already judged like old and like new from the rounds that
    measured it. Endpoints still unknown when neither may run more are "unknown" with no
    more runs: inconclusive, never "same"."""
    ends = (0, n - 1)
    early = _endpoints_first(n, samples, attempts, rule, decided)
    if isinstance(early, Judgement):
        return early
    diff = early
    verdicts = {0: Verdict.PASS, n - 1: Verdict.FAIL}
    positive = all(v > 0 for sample in samples.values() for _, v in sample)
    calls, more = {}, []
    first = {i: min((r for r, _ in samples.get(i, ())), default=-1) for i in attempts}
    for i in sorted((i for i in attempts if i not in ends), key=lambda i: (first[i], i)):
        sample = samples.get(i, ())
        if not sample:
            if attempts[i] < min(NO_NUMBER_TRIES, rule.max_runs):
                more.append(i)
            else:
                verdicts[i] = Verdict.SKIP
            continue
        sides = {v: [j for j, vj in verdicts.items() if vj is v]
                 for v in (Verdict.PASS, Verdict.FAIL)}
        refs = {v: [run for j in js for run in samples.get(j, ())] for v, js in sides.items()}
        x, old, new = corrected(sample, refs, positive)
        calls[i] = call = classify(x, old, new, rule)
        if call is Call.LIKE_OLD:
            verdicts[i] = Verdict.PASS
        elif call is Call.LIKE_NEW:
            verdicts[i] = Verdict.FAIL
        elif call is Call.UNKNOWN and attempts[i] < rule.max_runs:
            more.append(i)
        else:
            verdicts[i] = Verdict.SKIP      # like neither, or unresolved at max_runs
    return Judgement(verdicts, tuple(sorted(more)), diff, calls)


def corrected(sample: Sample, refs: Mapping[Verdict, Sample], positive: bool
              ) -> tuple[list[float], list[float], list[float]]:
    """The commit's numbers and both sides' (PASS: like old, FAIL: like new) on the
    compared scale, each less its round's drift as the reference runs of that round show."""
    def scale(runs: Sample) -> list[tuple[int, float]]:
        return [(r, v) for r, v in zip((r for r, _ in runs),
                                       seq.scaled([v for _, v in runs], positive))]
    x, sides = scale(sample), {v: scale(runs) for v, runs in refs.items()}
    location = {v: statistics.median(u for _, u in runs) for v, runs in sides.items()}
    drift = seq.offsets(sides, location)
    less = lambda runs: [v - drift.get(r, 0.0) for r, v in runs]     # noqa: E731
    return less(x), less(sides[Verdict.PASS]), less(sides[Verdict.FAIL])


def _endpoints_first(n: int, samples: Mapping[int, Sample], attempts: Mapping[int, int],
                     rule: Rule, decided: Difference | None) -> Judgement | Difference:
    """The endpoints' judgement while they are not known to differ, else their difference."""
    ends = (0, n - 1)
    retry = tuple(i for i in ends if not samples.get(i) and
                  attempts.get(i, 0) < min(NO_NUMBER_TRIES, rule.max_runs))
    unusable = [i for i in ends if not samples.get(i) and i not in retry]
    if retry:
        return Judgement({i: Verdict.SKIP for i in unusable}, more=retry)
    if unusable:        # the search reports invalid endpoints, naming the skipped one
        return Judgement({0: Verdict.SKIP if 0 in unusable else Verdict.PASS,
                          n - 1: Verdict.SKIP if n - 1 in unusable else Verdict.FAIL})
    diff = decided or endpoints(*together(samples[0], samples[n - 1]), rule)
    if diff.call != "differ":
        more = () if diff.call == "same" else \
            tuple(i for i in ends if attempts.get(i, 0) < rule.max_runs)
        return Judgement(more=more, difference=diff)
    return diff


def confirm(found: Result, samples: Mapping[int, Sample],
            attempts: Mapping[int, int], rule: Rule) -> Result | tuple[int, ...]:
    """The answer's own evidence: the last old and the first new commit must differ from
    each other by the same rule as the endpoints. Returns the result (ambiguous, with the
    numbers, if they do not), or the two commits when more runs may tell."""
    if found.status is not Status.FOUND:
        return found
    lo, hi = found.last_old, found.first_new
    pair = endpoints(*together(samples[lo], samples[hi]), rule)
    if pair.call == "differ":
        return found
    if pair.call == "unknown":
        more = tuple(i for i in (lo, hi) if attempts.get(i, 0) < rule.max_runs)
        if more:
            return more
    return Result(Status.AMBIGUOUS, last_old=lo, candidates=(hi,), old_outcome=found.old_outcome,
                  new_outcome=found.new_outcome, skipped=found.skipped,
                  explanation=f"the search ends between #{lo} and #{hi}, but their numbers do "
                              f"not differ by the rule: {pair.describe(rule)}; the change may "
                              f"be spread over several commits")
