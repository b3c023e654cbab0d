"""Sequential evidence for metric verdicts: as few runs as the noise allows. Pure.

Numbers are compared on a log scale where they are all positive (a machine 3% slower
makes every number 3% larger), else as they are. Each side's location is its median and
the noise its pooled median absolute deviation, so one far outlier moves neither.

- `interval`: the change between two samples with a (1 - alpha) interval and its p-value:
  Yuen's test on 20%-trimmed means (Welch's t on trimmed means, Winsorized variances),
  which holds its error rate under heavy tails and two-mode noise alike.
- `llr`: the log-likelihood ratio "like new" over "like old" of one number, under
  Student-t noise (4 degrees of freedom: heavy tails, so one far outlier moves a decision
  by a bounded amount). Summed over a commit's runs it is Wald's sequential probability
  ratio test: one run decides when the two sides lie far apart in units of the noise.
- `offsets`: how far each round's reference runs sit from their sides, the machine's
  drift, by which a commit's numbers of that round are corrected.
Two clock states (a GPU that runs some processes at a lower clock) are not told apart:
they count as noise, as wide as their distance, so they cost runs but name no culprit.
"""
from __future__ import annotations

import math
import statistics
from typing import Mapping, Sequence

NU = 4.0
MAD_TO_SIGMA = 1.4826
FLOOR = 1e-6                # the smallest noise believed (log units: 0.0001%)


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


def winsorized(values: Sequence[float]) -> list[float]:
    v = sorted(values)
    g = int(TRIM * len(v))
    return [min(max(x, v[g]), v[len(v) - 1 - g]) for x in v]


def trimmed(values: Sequence[float]) -> tuple[float, float, int]:
    """(20%-trimmed mean, the squared standard error Yuen gives it, the kept count)."""
    v = sorted(values)
    g = int(TRIM * len(v))
    kept = v[g:len(v) - g]
    h = len(kept)
    w = winsorized(v)
    var = statistics.variance(w) if len(w) > 1 else 0.0
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


def llr(x: float, old: float, new: float, s: float) -> float:
    """log p(x | new) - log p(x | old), Student-t noise of scale s."""
    def logt(z: float) -> float:
        return -(NU + 1) / 2 * math.log1p(z * z / NU)
    return logt((x - new) / s) - logt((x - old) / s)


def wald(alpha: float) -> float:
    """Wald's boundary for error rates alpha both ways: decide past +-this."""
    return math.log((1 - alpha) / alpha)


def offsets(refs: Mapping[int, Sequence[tuple[int, float]]], location: Mapping[int, float]
            ) -> dict[int, float]:
    """Per round, the median distance of the reference runs from their side's location:
    refs[side] holds (round, value) of the commits known to be on that side."""
    by_round: dict[int, list[float]] = {}
    for side, runs in refs.items():
        for r, v in runs:
            by_round.setdefault(r, []).append(v - location[side])
    return {r: statistics.median(d) for r, d in by_round.items()}

