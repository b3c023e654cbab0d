"""Metric verdicts: samples of a measurement in, "like old", "like new", "like neither" or
"unknown" out.

Pure, beside the search. A bisection on a metric first asks whether its two endpoints
differ at all (`endpoints`): significant, and the 90% interval of the relative change
beyond +-min_change ("differ"), or inside it ("same"). The k-th look at a pair spends
alpha = p / (k (k + 1)), so any number of looks keeps the false-difference rate at most p.
Then each commit is a question with two answers, like old or like new (`classify`):
Wald's sequential probability ratio test over its runs (sequential.py), so one run decides
when the sides lie far apart, and a commit whose numbers lie far from both sides is "like
neither", never forced into a side. `judge` turns all the samples into the search's
verdicts plus the commits that need more runs, correcting each round's numbers by the
drift the reference runs of neighbouring rounds show. The answer's pair is checked with
fresh runs (`confirmation.confirm`). Two clock states: see sequential.states.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from enum import Enum
from typing import Collection, Mapping, Sequence

from . import sequential as seq
from ..core.search import Verdict, open_interval


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
    earlier: tuple[int, ...] = ()    # a continued session's earlier --max-runs
    steps: bool = False          # check an answer against each build's own speed (steps.py)

    def __post_init__(self):
        if not 0 < self.p <= 0.25:      # a call at p reads a 1 - 2p interval
            raise ValueError("the p threshold must lie above 0 and at most 0.25")
        if self.min_change < 0:
            raise ValueError("the minimum change must not be negative")
        if self.block < 2 or self.max_runs < self.block:
            raise ValueError("runs per round must be >= 2 and max runs >= runs per round")

    @property
    def search_alpha(self) -> float:
        """The search's error rate per commit: five times p (at most 0.05). A wrong call can
        only change the answer through the answer's pair, which `confirm` calls again at p
        with fresh runs, so an answer is wrong at about p times this."""
        return min(0.05, 5 * self.p)

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
ENDPOINT_RUNS = 5
# Runs before a commit may be called like neither side.
NEITHER_RUNS = 8
# The confidence with which a change must be at least --min-change (one-sided).
SIZE_CONFIDENCE = 0.95
NEAR_ERRORS = 3    # standard errors of a difference within which a commit is at a side


def looks(max_runs: int, earlier: tuple[int, ...] = ()) -> list[int]:
    """The sizes at which a pair is looked at: ENDPOINT_RUNS, half as many again each time,
    max_runs last (few looks, mild thresholds), and a continued session's earlier ones."""
    sizes, n = [], ENDPOINT_RUNS
    while n < max_runs:
        sizes.append(n)
        n = max(n + 1, round(n * 1.5))
    return sorted({*sizes, *(e for e in earlier if e < max_runs), max_runs})


def endpoints(old: Sequence[float], new: Sequence[float], rule: Rule,
              final: bool = False) -> Difference:
    """Do two samples differ? They are looked at when the smaller reaches a size of
    `looks`; the k-th look tests at `rule.alpha(k)`. "differ": significant there (by Yuen's
    test; below seq.WELCH_BELOW runs by Welch's too), and at least min_change with 95%
    confidence (the 90% interval lies beyond +-min_change); "same": that interval and the
    near means' (seq.near_means: a slow path in some runs moves them) lie inside
    +-min_change; "unknown": else."""
    n = min(len(old), len(new))
    sizes = looks(max(n, rule.max_runs), rule.earlier)
    look = sizes.index(n) + 1 if n in sizes else max(1, sum(1 for k in sizes if k <= n))
    if final and n >= ENDPOINT_RUNS:     # no run can follow: one more look, its
        sizes, look = [n], sum(1 for k in sizes if k <= n) + 1    # threshold still in p
    alpha = rule.alpha(look)
    positive = min(min(old), min(new)) > 0
    a, b = seq.scaled(old, positive), seq.scaled(new, positive)
    a, b = seq.fold_pair(a, b)        # two machine states: each side's runs in one
    base = statistics.median(old)
    rel = lambda v: seq.relative(v, base, positive)        # noqa: E731
    delta, low, high, p = seq.interval(a, b, alpha)
    p = max(p, seq.welch(a, b)[3]) if n < seq.WELCH_BELOW else p
    (_, small, large, _), (_, mean_small, mean_large, _) = (
        f(a, b, 2 * (1 - SIZE_CONFIDENCE)) for f in (seq.interval, seq.near_means))
    m = rule.min_change
    call = "unknown"
    if n in sizes and p <= alpha and (rel(small) >= m or rel(large) <= -m):
        call = "differ"
    elif n in sizes and -m < rel(min(small, mean_small)) and rel(max(large, mean_large)) < m:
        call = "same"
    return Difference(call, p, Shift(rel(delta), rel(low), rel(high), 1 - alpha), len(old),
                      len(new))


def classify(x: Sequence[float], old: Sequence[float], new: Sequence[float],
             rule: Rule, alpha: float | None = None, st: seq.States | None = None) -> Call:
    """Like old or like new by the sequential test at error rates alpha (default p), when the
    commit's trimmed mean also lies near that side (within a quarter of the shift, or three
    standard errors of the difference); like neither when eight or more runs differ from
    both sides (at p / 100 with the pooled noise, and at p / 10 by Yuen's test on their own
    spread, which a minority clock state widens) and lie a quarter of the shift or more
    from each (a finding: more than a decision); unknown while neither holds. All three
    samples on one scale (see judge); `st`: the machine's two states, if it has them (see
    seq.states), and `old` and `new` then already folded (twice moves a side a gap)."""
    if not x or not old or not new:
        return Call.UNKNOWN
    lo_loc, hi_loc = seq.trimmed(old)[0], seq.trimmed(new)[0]
    s = st.sigma if st else seq.noise([old, new, x])
    def llr(a: float, b: float) -> float:        # b over a, summed over the runs
        if st:
            return sum(seq.mixed_llr(v, a, b, st) for v in x)
        return sum(seq.llr(v, a, b, s) for v in x)
    total = llr(lo_loc, hi_loc)
    bound = seq.wald(alpha or rule.p)
    width = abs(hi_loc - lo_loc)

    mine = seq.fold(x, st)           # at the commit's own most likely level
    mid = seq.trimmed(mine)[0]

    def near(side: Sequence[float], loc: float) -> bool:
        if st:          # that side's level explains the runs about as well as any level
            return seq.far_from(x, loc, st) < seq.wald(rule.p)
        return abs(mid - loc) <= width / 4 or seq.apart(mine, side, s) <= NEAR_ERRORS

    if total >= bound and near(new, hi_loc):
        return Call.LIKE_NEW
    if total <= -bound and near(old, lo_loc):
        return Call.LIKE_OLD
    if len(x) < NEITHER_RUNS:
        return Call.UNKNOWN
    if st:          # with two states a level is told by likelihood: folding may be wrong
        if all(seq.far_from(x, loc, st) >= seq.wald(rule.p / 100) for loc in (lo_loc, hi_loc)):
            return Call.NEITHER
        return Call.UNKNOWN
    dof = max(1, sum(len(g) - 1 for g in (old, new, x) if len(g) > 1))
    if min(abs(mid - lo_loc), abs(mid - hi_loc)) >= width / 4 and \
            all(seq.shifted(side, mine, s, dof, rule.p / 100)[3] <= rule.p / 100 and
                seq.interval(side, mine, rule.p / 10)[3] <= rule.p / 10 for side in (old, new)):
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


def guard(verdicts: Mapping[int, Verdict], n: int, attempts: Mapping[int, int],
          rule: Rule) -> tuple[int, ...]:
    """A round's drift guard: one run of each end of the interval still open, interleaved
    with the commits the search asks for. How far they sit from their sides is the
    machine's drift (see `corrected`). It never spends the last third of an end's
    --max-runs: those are kept for the answer's fresh runs and a split part's ends."""
    if not (0 in verdicts and n - 1 in verdicts):
        return ()
    return tuple(i for i in open_interval(n, verdicts)
                 if verdicts.get(i) in (Verdict.PASS, Verdict.FAIL) and
                 attempts.get(i, 0) < rule.max_runs - rule.max_runs // 3)


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
    first = settled_at(n, samples, rule)
    return first[0] if first else None


def settled_at(n: int, samples: Mapping[int, Sample], rule: Rule
               ) -> tuple[Difference, int] | None:
    """`settled`, with the round in which it was decided."""
    ends = (samples.get(0, ()), samples.get(n - 1, ()))
    for r in sorted({r for side in ends for r, _ in side}):
        upto = [[(k, v) for k, v in side if k <= r] for side in ends]
        if all(upto):
            diff = endpoints(*together(*upto), rule)
            if diff.call == "differ":
                return diff, r
    return None


def judge(n: int, samples: Mapping[int, Sample], attempts: Mapping[int, int],
          rule: Rule, decided: Difference | None = None, keep: int = 0) -> Judgement:
    """`samples[i]`: what was measured at candidate i; `attempts[i]`: its runs so far, the
    failed ones included; `decided`: the endpoints' difference once made (`settled`). A
    commit with no number after NO_NUMBER_TRIES runs is a skip; one still unknown at
    max_runs is unresolved (a skip that keeps its numbers). A commit is compared with the
    numbers of the commits already judged like old and like new from the rounds that
    measured it. Endpoints still unknown when neither may run more are "unknown" with no
    more runs: inconclusive, never "same". `keep`: runs of each endpoint that deciding the
    endpoints leaves unspent (a split part's end keeps them for its own pair, which
    `confirmation.confirm` checks by runs side by side). A commit still unknown is like
    neither also when it is so against the endpoints alone."""
    ends = (0, n - 1)
    early = _endpoints_first(n, samples, attempts, rule, decided, keep)
    if isinstance(early, Judgement):
        return early
    diff = early
    verdicts = {0: Verdict.PASS, n - 1: Verdict.FAIL}
    positive = all_positive(samples)
    st = machine_states(samples, positive)
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
        x, old, new = corrected(sample, references(samples, verdicts), positive, st)
        call = classify(numbers(x), old, new, rule, rule.search_alpha, st)
        if call is Call.UNKNOWN and len(sample) >= NEITHER_RUNS:
            # a side's other commits were called at the search's error rate (one like
            # neither among them pulls it over); the endpoints are theirs by definition
            x, old, new = corrected(sample, {Verdict.PASS: samples[0],
                                             Verdict.FAIL: samples[n - 1]}, positive, st)
            if classify(numbers(x), old, new, rule, rule.search_alpha, st) is Call.NEITHER:
                call = Call.NEITHER
        calls[i] = call
        if call is Call.LIKE_OLD:
            verdicts[i] = Verdict.PASS
        elif call is Call.LIKE_NEW:
            verdicts[i] = Verdict.FAIL
        elif call is Call.UNKNOWN and attempts[i] < rule.max_runs:
            more.append(i)
        else:
            verdicts[i] = Verdict.SKIP      # like neither, or unresolved at max_runs
    return Judgement(verdicts, tuple(sorted(more)), diff, calls)


def references(samples: Mapping[int, Sample], verdicts: Mapping[int, Verdict],
               leave_out: int | None = None) -> dict[Verdict, Sample]:
    """The runs of the commits judged like old (PASS) and like new (FAIL)."""
    return {side: [run for j, v in verdicts.items() if v is side and j != leave_out
                   for run in samples.get(j, ())] for side in (Verdict.PASS, Verdict.FAIL)}


def all_positive(samples: Mapping[int, Sample]) -> bool:
    """Whether every number is positive: then they are compared on a log scale."""
    return all(v > 0 for sample in samples.values() for _, v in sample)


def machine_states(samples: Mapping[int, Sample], positive: bool) -> seq.States | None:
    """The machine's two states, if the runs of the commits measured more than once show
    them (every commit's number may fall in either)."""
    return seq.states([seq.scaled(numbers(s), positive) for s in samples.values()])


def corrected(sample: Sample, refs: Mapping[Verdict, Sample], positive: bool,
              st: seq.States | None = None
              ) -> tuple[list[tuple[int, float]], list[float], list[float]]:
    """The commit's (round, number) and both sides' numbers (PASS: like old, FAIL: like
    new) on the compared scale, each less its round's drift as the reference runs show
    (the sides' runs of the upper state brought down first, `seq.fold`)."""
    sides, offset = _drift(refs, positive, st)
    x = list(zip((r for r, _ in sample), seq.scaled([v for _, v in sample], positive)))
    less = lambda runs: [(r, v - offset.get(r, 0.0)) for r, v in runs]     # noqa: E731
    return less(x), numbers(less(sides[Verdict.PASS])), numbers(less(sides[Verdict.FAIL]))


def _drift(refs: Mapping[Verdict, Sample], positive: bool, st: seq.States | None
           ) -> tuple[dict[Verdict, list[tuple[int, float]]], dict[int, float]]:
    sides = {}
    for side, runs in refs.items():
        values = seq.fold(seq.scaled([v for _, v in runs], positive), st)
        sides[side] = list(zip((r for r, _ in runs), values))
    location = {v: statistics.median(u for _, u in runs) for v, runs in sides.items() if runs}
    return sides, seq.offsets({v: r for v, r in sides.items() if r}, location,
                              seq.noise([numbers(v) for v in sides.values()]))


def drift(samples: Mapping[int, Sample], verdicts: Mapping[int, Verdict]) -> dict[int, float]:
    """The drift taken out of each round's numbers, as a relative change (for the report)."""
    positive = all_positive(samples)
    _, offset = _drift(references(samples, verdicts), positive,
                       machine_states(samples, positive))
    return {r: seq.relative(d, 1.0, positive) for r, d in sorted(offset.items())}


def _endpoints_first(n: int, samples: Mapping[int, Sample], attempts: Mapping[int, int],
                     rule: Rule, decided: Difference | None, keep: int = 0
                     ) -> Judgement | Difference:
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
    shared = together(samples[0], samples[n - 1])
    diff = decided or endpoints(*shared, rule)
    limit = rule.max_runs - keep
    if diff.call == "unknown" and all(attempts.get(i, 0) >= limit for i in ends) \
            and sum(map(len, shared)) < len(samples[0]) + len(samples[n - 1]):
        wide = every_round(samples[0], samples[n - 1], rule)
        if wide.call == "differ":       # a part's ends: what it names is confirmed by
            diff = wide                 # pairs measured side by side (confirm)
    if diff.call != "differ":
        more = () if diff.call == "same" else \
            tuple(i for i in ends if attempts.get(i, 0) < limit)
        return Judgement(more=more, difference=diff)
    return diff


def every_round(old: Sample, new: Sample, rule: Rule) -> Difference:
    """The last look at two ends that may run no more and that ran in rounds apart (a
    part's end is mostly measured beside other commits, so the rounds they share hold few
    of its runs): every run of theirs, each less its round's drift as their own runs of
    that round show it. The whole range's ends share every round: never asked there."""
    positive = all_positive({0: old, 1: new})
    st = machine_states({0: old, 1: new}, positive)
    _, offset = _drift({Verdict.PASS: old, Verdict.FAIL: new}, positive, st)
    back = (lambda v: math.exp(v)) if positive else (lambda v: v)     # noqa: E731
    a, b = ([back(v - offset.get(r, 0.0)) for r, v in
             zip((r for r, _ in side), seq.scaled(numbers(side), positive))]
            for side in (old, new))
    return endpoints(a, b, rule, final=True)
