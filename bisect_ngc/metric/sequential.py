"""Sequential evidence for metric verdicts: as few runs as the noise allows. Pure.

Numbers are compared on a log scale where they are all positive (a machine 3% slower
makes every number 3% larger), else as they are. Each side's location is its median and
the noise its pooled median absolute deviation, so one far outlier moves neither.

- `interval`: the change between two samples with a (1 - alpha) interval and its p-value:
  Yuen's test on 20%-trimmed means (Welch's t on trimmed means, Winsorized variances),
  which holds its error rate under heavy tails; below WELCH_BELOW runs a side, where the
  trim drops one run a tail, a difference also needs Welch's t on all the runs (`welch`),
  which a clock state's single run cannot fool.
- `llr`: the log-likelihood ratio "like new" over "like old" of one number, under
  Student-t noise (4 degrees of freedom: heavy tails, so one far outlier moves a decision
  by a bounded amount). Summed over a commit's runs it is Wald's sequential probability
  ratio test: one run decides when the two sides lie far apart in units of the noise.
- `offsets`: how far the reference runs of each round and its neighbours sit from their
  sides, the machine's drift, by which a commit's numbers of that round are corrected.
- `states`: two clock states (a GPU that runs some processes at a lower clock), found by
  an EM fit once the runs show them, then weighed as a mixture (`mixed_llr`, `far_from`);
  until then they count as noise, as wide as their distance, and cost runs. Two
  commits' runs of the same pass, as taken, differ by the change, or by it plus or less
  the gap where the two runs fell in different states (`paired_llr`).
"""
from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass
from typing import Mapping, Sequence, TypeVar

NU = 4.0
MAD_TO_SIGMA = 1.4826
FLOOR = 1e-6                # the smallest noise believed (log units: 0.0001%)
# Runs a side from which Yuen's trim drops two or more runs a tail: a second clock state's
# lone run can no longer be what is dropped, and Welch's t, which one spike in ten runs
# sways, no longer has a say (it turned half of the clear 5% changes with spikes into
# "could not be told apart").
WELCH_BELOW = 10


def scaled(values: Sequence[float], positive: bool) -> list[float]:
    return [math.log(v) for v in values] if positive else list(values)


def relative(delta: float, base: float, positive: bool) -> float:
    """A difference on the compared scale as a relative change."""
    return math.expm1(delta) if positive else delta / (abs(base) or 1.0)


TRIM = 0.2


def noise(groups: Sequence[Sequence[float]]) -> float:
    """The pooled scale, the larger of two: the median absolute deviation from each group's
    own median (an odd group's median itself left out, which would pull it to zero), and
    the 20%-Winsorized standard deviation (which sees two clock states as spread)."""
    deviations: list[float] = []
    squares, dof = 0.0, 0
    for g in groups:
        if len(g) < 2:
            continue
        m = statistics.median(g)
        devs = sorted(abs(v - m) for v in g)
        deviations += devs[1:] if len(g) % 2 else devs
        w = winsorized(g)
        squares += sum((v - statistics.fmean(w)) ** 2 for v in w)
        dof += len(g) - 1
    if not deviations:
        return FLOOR
    return max(MAD_TO_SIGMA * statistics.median(deviations), math.sqrt(squares / dof), FLOOR)


def wild(groups: Sequence[Sequence[float]], least: float = 0.0) -> float:
    """The share of runs that lie WILD noise widths from their group's median, the width by
    the median absolute deviation (which a minority clock state or a rare outlier leaves
    narrow), and more than `least`: a second clock state, or a heavy tail, that a few runs
    in a row can share. 0 when none does, else the share's 95% upper bound (a commit
    measured only in that state shows no run wild: the share seen is low)."""
    from scipy import stats
    devs = [abs(v - m) for g in groups if len(g) >= 2 for m in [statistics.median(g)]
            for v in g]
    width = max(MAD_TO_SIGMA * statistics.median(devs), FLOOR) if devs else 0.0
    far = sum(d > max(WILD * width, least) for d in devs)
    return float(stats.beta.ppf(0.95, far + 1, len(devs) - far + 1)) if far else 0.0


WILD = 6.0


def winsorized(values: Sequence[float], trim: float = TRIM) -> list[float]:
    v = sorted(values)
    g = int(trim * len(v))
    return [min(max(x, v[g]), v[len(v) - 1 - g]) for x in v]


def spread(values: Sequence[float]) -> tuple[float, int]:
    """The variance of normal noise that values' 20%-Winsorized variance implies (a wild
    run in five at either end moves it a bounded amount), and its degrees of freedom."""
    from scipy import stats
    g = int(TRIM * len(values))
    share, gamma = 1.0, g / len(values)
    if g:       # a normal's Winsorized variance over its variance
        c = float(stats.norm.ppf(1 - gamma))
        share = 1 - 2 * gamma - 2 * c * float(stats.norm.pdf(c)) + 2 * gamma * c * c
    return statistics.variance(winsorized(values)) / share, max(1, len(values) - 2 * g - 1)


def resolution(values: Sequence[float]) -> float:
    """The smallest step between distinct numbers: a metric printed rounded has one."""
    v = sorted(set(values))
    return min((b - a for a, b in zip(v, v[1:])), default=0.0)


def trimmed(values: Sequence[float]) -> tuple[float, float, int]:
    """(20%-trimmed mean, the squared standard error Yuen gives it, the kept count). The
    Winsorized variance is at least that of the rounding, (step / 2)^2 / 3: runs that tie
    in the middle are not runs without noise."""
    v = sorted(values)
    g = int(TRIM * len(v))
    kept = v[g:len(v) - g]
    h = len(kept)
    w = winsorized(v)
    var = statistics.variance(w) if len(w) > 1 else 0.0
    var = max(var, (resolution(v) / 2) ** 2 / 3)
    return statistics.fmean(kept), (len(v) - 1) * var / (h * max(h - 1, 1)), h


def interval(old: Sequence[float], new: Sequence[float], alpha: float
             ) -> tuple[float, float, float, float]:
    """(change, low, high, p) of new against old on the compared scale (Yuen's test)."""
    from scipy import stats
    (m_old, d_old, h_old), (m_new, d_new, h_new) = trimmed(old), trimmed(new)
    floor = (FLOOR * FLOOR) / max(h_old, 1)
    d_old, d_new = max(d_old, floor), max(d_new, floor)
    se = math.sqrt(d_old + d_new)
    df = max(1.0, (d_old + d_new) ** 2 / (d_old ** 2 / max(h_old - 1, 1) +
                                          d_new ** 2 / max(h_new - 1, 1)))
    delta = m_new - m_old
    q = float(stats.t.ppf(1 - alpha / 2, df))
    p = float(2 * stats.t.sf(abs(delta) / se, df))
    return delta, delta - q * se, delta + q * se, p


def welch(old: Sequence[float], new: Sequence[float], alpha: float = 0.05
          ) -> tuple[float, float, float, float]:
    """(change, low, high, p) of the means, every run counted: Welch's t. Yuen's test trims
    one run in five, and at five runs that can be a second clock state's only run: then
    each side's trimmed mean sits in one state, and a machine's two states look like a
    change. And a slow path taken in some runs moves the means, not the trimmed means."""
    from scipy import stats
    if min(len(old), len(new)) < 2:
        return 0.0, -math.inf, math.inf, 1.0
    d_old, d_new = (max(statistics.variance(g), FLOOR * FLOOR) / len(g) for g in (old, new))
    df = (d_old + d_new) ** 2 / (d_old ** 2 / (len(old) - 1) + d_new ** 2 / (len(new) - 1))
    return _t_interval(statistics.fmean(new) - statistics.fmean(old),
                       math.sqrt(d_old + d_new), df, alpha)


def near_means(old: Sequence[float], new: Sequence[float], alpha: float
               ) -> tuple[float, float, float, float]:
    """`welch` on 10%-Winsorized runs: a slow path in a third of one side's runs moves
    these means where the 20%-trimmed ones hardly move, and a spike in ten runs does not."""
    return welch(winsorized(old, 0.1), winsorized(new, 0.1), alpha)


def apart(x: Sequence[float], side: Sequence[float], s: float) -> float:
    """How many standard errors (noise s; a trimmed mean's efficiency) x's trimmed mean
    lies from side's."""
    se = 1.25 * s * math.sqrt(1 / len(x) + 1 / len(side))
    return abs(trimmed(x)[0] - trimmed(side)[0]) / max(se, FLOOR)


def llr(x: float, old: float, new: float, s: float) -> float:
    """log p(x | new) - log p(x | old), Student-t noise of scale s."""
    def logt(z: float) -> float:
        return -(NU + 1) / 2 * math.log1p(z * z / NU)
    return logt((x - new) / s) - logt((x - old) / s)


def wald(alpha: float) -> float:
    """Wald's boundary for error rates alpha both ways: decide past +-this."""
    return math.log((1 - alpha) / alpha)


def pooled(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """The pooled noise of all groups (see `noise`) and its degrees of freedom."""
    return noise(groups), max(1, sum(len(g) - 1 for g in groups if len(g) > 1))


def shifted(a: Sequence[float], b: Sequence[float], s: float, dof: int, alpha: float
            ) -> tuple[float, float, float, float]:
    """(change, low, high, p) of b's trimmed mean over a's, with the noise s known
    from every commit's runs (dof degrees of freedom): a pair of few runs each can differ
    significantly when the whole session shows the noise small."""
    se = 1.25 * s * math.sqrt(1 / len(a) + 1 / len(b))     # a trimmed mean's efficiency
    return _t_interval(trimmed(b)[0] - trimmed(a)[0], se, dof, alpha)


def paired(d: Sequence[float], s: float, dof: int, alpha: float
           ) -> tuple[float, float, float, float]:
    """`shifted` for runs matched pass by pass: the trimmed mean of their differences d,
    so a pass in which the machine switched state is trimmed as one, not as two runs."""
    return _t_interval(trimmed(d)[0], 1.25 * s * math.sqrt(2 / len(d)), dof, alpha)


def _t_interval(delta: float, se: float, dof: float, alpha: float
                ) -> tuple[float, float, float, float]:
    from scipy import stats
    q = float(stats.t.ppf(1 - alpha / 2, dof))
    return delta, delta - q * se, delta + q * se, float(2 * stats.t.sf(abs(delta) / se, dof))


DRIFT_WINDOW = 3   # rounds either side whose reference runs estimate a round's drift
DRIFT_Z = 1.0      # an offset is believed only beyond this many of its standard errors


K = TypeVar("K")


def offsets(refs: Mapping[K, Sequence[tuple[int, float]]], location: Mapping[K, float],
            s: float) -> dict[int, float]:
    """Per round, the machine's drift: the median distance from their side's location of
    the reference runs (refs[side] holds (round, value) of the commits known to be on
    that side) of the rounds within DRIFT_WINDOW of it, shrunk towards 0 by DRIFT_Z of
    its standard errors (noise s). A machine drifts slowly: neighbouring rounds' guard
    runs together see it, where one run alone would add its own noise to every number
    it corrects; and a machine that does not drift is hardly corrected at all."""
    by_round: dict[int, list[float]] = {}
    for side, runs in refs.items():
        for r, v in runs:
            by_round.setdefault(r, []).append(v - location[side])
    out = {}
    for r in range(min(by_round, default=0), max(by_round, default=-1) + 1):
        near = [d for k in range(r - DRIFT_WINDOW, r + DRIFT_WINDOW + 1)
                for d in by_round.get(k, ())]
        if near:
            m = statistics.median(near)
            shrunk = max(0.0, abs(m) - DRIFT_Z * 1.25 * s / math.sqrt(len(near)))
            if shrunk:
                out[r] = math.copysign(shrunk, m)
    return out


@dataclass(frozen=True)
class States:
    """Two machine states (a GPU that runs some processes at a lower clock): a run is in the
    upper one with probability `share`, `gap` above its commit's level on the compared
    scale; `sigma` is the noise within a state."""
    gap: float
    share: float
    sigma: float


STATES_RUNS = 16          # runs, in groups of STATES_GROUP or more, before two states are sought
STATES_GROUP = 6          # a smaller group fits any two states by placing its own level
STATES_SEPARATION = 4.0   # the gap, in within-state noise, before two states are believed
STATES_PRICE = 2.5        # times log(runs): the log-likelihood gain two states must show


def _phi(z: float) -> float:
    return math.exp(-0.5 * z * z)


def _em(gs: list[list[float]], gap: float) -> tuple[float, States, list[float]] | None:
    """EM from a starting gap: (log-likelihood, states, each group's level), or None if
    one state empties."""
    n = sum(len(g) for g in gs)
    level = [min(g) for g in gs]
    share, sigma = 0.5, max(gap / 4, FLOOR)
    for _ in range(30):
        resp = []
        for g, lv in zip(gs, level):
            rs = []
            for v in g:
                up = share * _phi((v - lv - gap) / sigma)
                down = (1 - share) * _phi((v - lv) / sigma)
                rs.append(up / (up + down) if up + down > 0 else float(v - lv > gap / 2))
            resp.append(rs)
        level = [statistics.fmean(v - r * gap for v, r in zip(g, rs)) for g, rs in zip(gs, resp)]
        up = sum(r for rs in resp for r in rs)
        if up < 1 or up > n - 1:
            return None
        gap = sum(r * (v - lv) for g, rs, lv in zip(gs, resp, level) for v, r in zip(g, rs)) / up
        share = up / n
        sigma = max(FLOOR, math.sqrt(sum((1 - r) * (v - lv) ** 2 + r * (v - lv - gap) ** 2
                                         for g, rs, lv in zip(gs, resp, level)
                                         for v, r in zip(g, rs)) / n))
    ll = sum(math.log((1 - share) * _phi((v - lv) / sigma) + share * _phi((v - lv - gap) / sigma)
                      + 1e-300) for g, lv in zip(gs, level) for v in g) - n * math.log(sigma)
    return ll, States(gap, share, sigma), level


def states(groups: Sequence[Sequence[float]]) -> States | None:
    return _states(tuple(tuple(g) for g in groups if len(g) >= STATES_GROUP))


@functools.lru_cache(maxsize=256)       # a session asks again with the same numbers often
def _states(groups: tuple[tuple[float, ...], ...]) -> States | None:
    """Two states shared by every group (each group at a level of its own), by EM from a
    few starting gaps, on the groups of STATES_GROUP runs or more; None unless they explain
    the numbers better than one state by a log-likelihood ratio of STATES_PRICE log(runs)
    (2.5 times BIC's price of the two parameters more), lie STATES_SEPARATION apart,
    each holds a tenth of the runs, and two groups or more show both, twice each. One
    normal state passes all that in about 1 in 100 tries of five commits of six runs,
    never in 400 of two of thirty; two states 10% apart at 2% noise, in 96 of 100 tries
    of two commits of thirty (88 at 3 log(runs)): benchmarks/states_price.py. Real
    timings of two commits of eight on a CPU pass too (tests/metric/test_states.py):
    see fold_pair."""
    gs = [list(g) for g in groups if len(g) >= STATES_GROUP]
    n = sum(len(g) for g in gs)
    if n < STATES_RUNS:
        return None
    spread = max(max(g) - min(g) for g in gs)
    fits = [f for k in (0.5, 0.7, 0.9) if (f := _em(gs, max(spread * k, FLOOR)))]
    if not fits:
        return None
    two, st, level = max(fits, key=lambda f: f[0])
    one_sigma = max(FLOOR, math.sqrt(sum((v - statistics.fmean(g)) ** 2 for g in gs for v in g)
                                     / n))
    one = -n / 2 - n * math.log(one_sigma)
    both = sum(1 for g, lv in zip(gs, level)
               if 2 <= sum(v - lv > st.gap / 2 for v in g) <= len(g) - 2)
    if two - one < STATES_PRICE * math.log(n) or st.gap < STATES_SEPARATION * st.sigma or \
            not 0.1 <= st.share <= 0.9 or both < 2:
        return None
    return st


def fold(values: Sequence[float], st: States | None) -> list[float]:
    """A group's numbers with the upper state's runs brought down by the gap (each run to
    the state more likely at the group's own level)."""
    if st is None or not values:
        return list(values)
    best = (-math.inf, min(values))
    for start in (min(values), min(values) - st.gap, statistics.median(values)):
        lv = start
        for _ in range(10):
            up = [v - lv - st.gap > -(v - lv) for v in values]    # nearer the upper level
            lv = statistics.fmean(v - u * st.gap for v, u in zip(values, up))
        ll = sum(math.log((1 - st.share) * _phi((v - lv) / st.sigma) +
                          st.share * _phi((v - lv - st.gap) / st.sigma) + 1e-300)
                 for v in values)
        if ll > best[0]:
            best = (ll, lv)
    lv = best[1]
    return [v - st.gap if abs(v - lv - st.gap) < abs(v - lv) else v for v in values]


def fold_pair(a: Sequence[float], b: Sequence[float]) -> tuple[list[float], list[float]]:
    """Two samples folded by the two states their runs show (see states), unless the
    folded change may be as wide as the gap (the far end of its 90% interval) and lies a
    quarter gap or more from the unfolded one: folding may then have taken one commit's
    level for the other state's, and a change that wide is seen unfolded."""
    st = states([a, b])
    fa, fb = fold(a, st), fold(b, st)
    if st is None:
        return fa, fb
    folded, low, high, _ = interval(fa, fb, 0.1)
    moved = abs(folded - interval(a, b, 0.1)[0])
    return (list(a), list(b)) if max(-low, high) >= st.gap and moved >= st.gap / 4 else (fa, fb)


def mixed_logp(x: float, level: float, st: States) -> float:
    """log p(x) for a commit at `level` with two states: its level or level + gap."""
    def t(z: float) -> float:
        return (1 + z * z / NU) ** (-(NU + 1) / 2)
    return math.log((1 - st.share) * t((x - level) / st.sigma) +
                    st.share * t((x - level - st.gap) / st.sigma) + 1e-300)


def mixed_llr(x: float, old: float, new: float, st: States) -> float:
    """llr with two states: each side is a mixture of its level and its level + gap."""
    return mixed_logp(x, new, st) - mixed_logp(x, old, st)


def paired_llr(d: Sequence[float], delta: float, st: States) -> float:
    """log p(d | b lies delta above a) - log p(d | b is a's level), d: b's runs less a's,
    pass by pass. Each run is in either state at random, so a difference is off by the gap
    either way with probability share (1 - share) each: a pair that reads the change only
    because one commit was measured in the upper state loses, a change as wide as the gap
    included."""
    w = st.share * (1 - st.share)
    s = st.sigma * math.sqrt(2)

    def logp(x: float, centre: float) -> float:
        return math.log(sum(wk * (1 + ((x - centre - k * st.gap) / s) ** 2 / NU)
                            ** (-(NU + 1) / 2) for k, wk in ((-1, w), (0, 1 - 2 * w), (1, w)))
                        + 1e-300)
    return sum(logp(x, delta) - logp(x, 0.0) for x in d)


def far_from(x: Sequence[float], level: float, st: States) -> float:
    """How much better than `level` the best level explains x (a log-likelihood ratio):
    a commit whose runs all fell in one state fits two levels a gap apart equally."""
    best = max(sum(mixed_logp(v, c, st) for v in x)
               for c in {u - k * st.gap for u in x for k in (0, 1)})
    return best - sum(mixed_logp(v, level, st) for v in x)
