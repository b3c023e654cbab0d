"""Metric verdicts: samples of a measurement in, "like old", "like new" or "unknown" out.

Pure, beside the search. A bisection on a metric first asks whether its two endpoints
differ at all (`endpoints`); only then is each commit's sample compared with both
endpoints' samples (`classify`), and `judge` turns all the samples into the search's
verdicts plus the commits that need more runs. Every decision is a function of the
samples as multisets, so the order in which runs arrive never changes an answer.

The test is Mann-Whitney U (two-sided), or Pinpoint's min(Kolmogorov-Smirnov, Mann-Whitney
U). A sample is looked at again after each block of runs, up to `max_runs`; each look uses
`p / looks` (Bonferroni), so peeking keeps the false-difference rate at most `p`.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from enum import Enum
from typing import Collection, Mapping, Sequence

from .search import Result, Status, Verdict, open_interval


class Call(str, Enum):
    LIKE_OLD = "like-old"
    LIKE_NEW = "like-new"
    UNKNOWN = "unknown"


class Statistic(str, Enum):
    MWU = "mwu"             # Mann-Whitney U
    PINPOINT = "pinpoint"   # min(Kolmogorov-Smirnov, Mann-Whitney U), as Chromium's Pinpoint


@dataclass(frozen=True)
class Rule:
    p: float = 0.01              # the false-difference rate allowed over all looks
    min_change: float = 0.02     # relative; smaller differences are "no change"
    test: Statistic = Statistic.MWU
    block: int = 5               # runs a commit gets per round
    max_runs: int = 30           # per commit; past it an unknown is unresolved
    lower_is_better: bool = True

    def __post_init__(self):
        if not 0 < self.p < 1:
            raise ValueError("the p threshold must lie between 0 and 1")
        if self.min_change < 0:
            raise ValueError("the minimum change must not be negative")
        if self.block < 2 or self.max_runs < self.block:
            raise ValueError("runs per round must be >= 2 and max runs >= runs per round")

    @property
    def looks(self) -> int:
        return math.ceil(self.max_runs / self.block)

    @property
    def alpha(self) -> float:
        """The threshold of one look."""
        return self.p / self.looks


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
        return (f"{s.change:+.2%} (the {s.confidence:.0%} interval {s.low:+.2%} .. "
                f"{s.high:+.2%}; p = {self.p:.2g} from {self.n_old} and {self.n_new} runs; "
                f"a change must be at least {rule.min_change:.1%} at p <= {rule.alpha:.2g})")


def p_value(a: Sequence[float], b: Sequence[float], test: Statistic = Statistic.MWU) -> float:
    from scipy import stats
    a, b = sorted(a), sorted(b)
    if a == b or (len(set(a)) == 1 and set(a) == set(b)):
        return 1.0
    mwu = float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    if test is Statistic.PINPOINT:
        return min(mwu, float(stats.ks_2samp(a, b).pvalue))
    return mwu


def shift(a: Sequence[float], b: Sequence[float], confidence: float = 0.99) -> Shift:
    from scipy import stats
    base = statistics.median(a)
    diffs = sorted(y - x for x in a for y in b)
    n, m = len(a), len(b)
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    k = int(math.floor(n * m / 2 - z * math.sqrt(n * m * (n + m + 1) / 12)))
    k = min(max(k, 0), len(diffs) - 1)
    scale = abs(base) or 1.0
    return Shift(statistics.median(diffs) / scale, diffs[k] / scale,
                 diffs[len(diffs) - 1 - k] / scale, confidence)


def endpoints(old: Sequence[float], new: Sequence[float], rule: Rule) -> Difference:
    """Do the endpoints differ? "differ": p <= alpha and the shift is at least min_change;
    "same": the shift's interval lies inside +-min_change, or both sides reached max_runs;
    "unknown": more runs may tell."""
    p = p_value(old, new, rule.test)
    s = shift(old, new, 1 - rule.alpha)
    if p <= rule.alpha and abs(s.change) >= rule.min_change:
        call = "differ"
    elif -rule.min_change < s.low and s.high < rule.min_change or \
            min(len(old), len(new)) >= rule.max_runs:
        call = "same"
    else:
        call = "unknown"
    return Difference(call, p, s, len(old), len(new))


def classify(x: Sequence[float], old: Sequence[float], new: Sequence[float],
             rule: Rule) -> Call:
    """Like old: differs from new beyond noise and by a material change, not from old, and
    lies on old's side of the midpoint. Like new: the mirror. Else unknown."""
    if not x:
        return Call.UNKNOWN
    mid = (statistics.median(old) + statistics.median(new)) / 2
    nearer_new = (statistics.median(x) > mid) == (statistics.median(new) > mid)

    def differs(ref: Sequence[float]) -> bool:
        return p_value(x, ref, rule.test) <= rule.alpha and \
            abs(shift(ref, x, 1 - rule.alpha).change) >= rule.min_change / 2

    from_old, from_new = differs(old), differs(new)
    if from_old and not from_new and nearer_new:
        return Call.LIKE_NEW
    if from_new and not from_old and not nearer_new:
        return Call.LIKE_OLD
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


def judge(n: int, samples: Mapping[int, Sample], attempts: Mapping[int, int],
          rule: Rule) -> Judgement:
    """`samples[i]`: what was measured at candidate i; `attempts[i]`: its runs so far, the
    failed ones included. A commit with no number is a skip; one still unknown at max_runs is
    unresolved (a skip that keeps its numbers). A commit is compared with the numbers of the
    commits already judged like old and like new from the rounds that measured it."""
    ends = (0, n - 1)
    unusable = [i for i in ends if attempts.get(i, 0) and not samples.get(i)]
    untried = tuple(i for i in ends if not attempts.get(i, 0))
    if untried:
        return Judgement({i: Verdict.SKIP for i in unusable}, more=untried)
    if unusable:        # the search reports invalid endpoints, naming the skipped one
        return Judgement({0: Verdict.SKIP if 0 in unusable else Verdict.PASS,
                          n - 1: Verdict.SKIP if n - 1 in unusable else Verdict.FAIL})
    diff = endpoints(*together(samples[0], samples[n - 1]), rule)
    if diff.call != "differ":
        more = () if diff.call == "same" else \
            tuple(i for i in ends if attempts.get(i, 0) < rule.max_runs)
        return Judgement(more=more, difference=diff)
    verdicts = {0: Verdict.PASS, n - 1: Verdict.FAIL}
    calls, more = {}, []
    first = {i: min((r for r, _ in samples.get(i, ())), default=-1) for i in attempts}
    for i in sorted((i for i in attempts if i not in ends), key=lambda i: (first[i], i)):
        sample = samples.get(i, ())
        if not sample:
            verdicts[i] = Verdict.SKIP
            continue
        sides = {v: [j for j, vj in verdicts.items() if vj is v]
                 for v in (Verdict.PASS, Verdict.FAIL)}
        seen = {v: {r for j in js for r, _ in samples.get(j, ())} for v, js in sides.items()}
        # the rounds that measured i beside a commit of each side (not those where i was
        # itself the reference of another)
        rounds = {r for r, _ in sample} & seen[Verdict.PASS] & seen[Verdict.FAIL]
        if rounds:
            x = numbers(sample, rounds)
            refs = {v: [y for j in js for y in numbers(samples[j], rounds)]
                    for v, js in sides.items()}
        else:
            x = numbers(sample)
            refs = {Verdict.PASS: numbers(samples[0]), Verdict.FAIL: numbers(samples[n - 1])}
        calls[i] = call = classify(x, refs[Verdict.PASS], refs[Verdict.FAIL], rule)
        if call is Call.LIKE_OLD:
            verdicts[i] = Verdict.PASS
        elif call is Call.LIKE_NEW:
            verdicts[i] = Verdict.FAIL
        elif attempts[i] < rule.max_runs:
            more.append(i)
        else:
            verdicts[i] = Verdict.SKIP
    return Judgement(verdicts, tuple(sorted(more)), diff, calls)


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
