"""Whether an answer's pair is a step between two levels, with commits as units. Pure.

Each build has its own speed (code layout and alignment move with every source change),
the same in every run of it, so no number of runs removes it: a commit sits at its side's
level plus an offset of spread tau, the commit-to-commit spread. tau is bounded from above
by the commits of the part measured on each side (`between`), and the pair stands only
where each of its commits, and the BEYOND nearest past each within the part (its end when
near), is told its own side's against that spread (`spread`). Otherwise a commit with a
large offset may have been called the other side's, and the pair be two neighbours that
merely differ.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Mapping, Sequence

from . import sequential as seq
from .comparator import Rule, Sample, all_positive, machine_states, numbers
from ..core.search import Verdict

# tau's bound: the level at which the sides' commits could spread this little or less
TAU_BOUND = 0.2
# commits past each side of the pair that must agree with it: two builds in a row as far
# off as the change are rare, three all but unheard of
BEYOND = 2

# run noise, as a share of tau^2, from which more runs of a commit could still tell
RUNS_HELP = 0.1
Unit = tuple[float, float]      # a commit's level and its squared standard error


def between(sides: Sequence[Sequence[Unit]]) -> float | None:
    """An upper bound on tau^2 from the spread of the commit levels within each side, less
    what their own run noise explains; None where no side holds two commits."""
    from scipy import stats
    squares, dof, errors = 0.0, 0, []
    for side in sides:
        if len(side) < 2:
            continue
        mean = statistics.fmean(m for m, _ in side)
        squares += sum((m - mean) ** 2 for m, _ in side)
        dof += len(side) - 1
        errors += [e for _, e in side]
    if not dof:
        return None
    return max(0.0, squares / float(stats.chi2.ppf(TAU_BOUND, dof)) - statistics.fmean(errors))


def units(samples: Mapping[int, Sample]) -> dict[int, Unit]:
    """Each measured commit's level (trimmed mean, folded where the machine has two clock
    states) and its squared standard error, never below the pooled run noise's."""
    positive = all_positive(samples)
    st = machine_states(samples, positive)
    folded = {i: seq.fold(seq.scaled(v, positive), st)
              for i, v in ((i, numbers(s)) for i, s in samples.items()) if v}
    s = st.sigma if st else seq.pooled(list(folded.values()))[0]
    out = {}
    for i, v in folded.items():
        mean, se2, _ = seq.trimmed(v)
        out[i] = (mean, max(se2, s * s / len(v)))
    return out


def _log_odds(x: Unit, own: Sequence[Unit], other: Sequence[Unit], tau2: float) -> float:
    """log p(x | own side's level) - log p(x | the other's), each level the mean of its
    commits (x's own where it is alone on its side), with tau in every commit."""
    def logp(level: Sequence[Unit]) -> float:
        if not level:
            return -0.5 * math.log(tau2 + x[1])
        mean = statistics.fmean(m for m, _ in level)
        var = tau2 + x[1] + (tau2 + statistics.fmean(e for _, e in level)) / len(level)
        return -0.5 * ((x[0] - mean) ** 2 / var + math.log(var))
    return logp(own) - logp(other)


@dataclass(frozen=True)
class Doubt:
    """Why a pair is not (yet) a step: `commit` is not told its side's, and `runs` are the
    commits whose runs could still tell: those of the step's neighbourhood with fewer than
    a round of runs, or whose run noise is RUNS_HELP or more of the spread's bound (it
    then holds that noise as much as any spread between builds)."""
    commit: int
    runs: tuple[int, ...]
    why: str


def spread(lo: int, hi: int, samples: Mapping[int, Sample], verdicts: Mapping[int, Verdict],
           rule: Rule, part: tuple[int, int] | None = None) -> Doubt | None:
    """None where lo, hi and the BEYOND nearest commits past each within `part` (a..b,
    default the whole range; `verdicts` are the part's own) are each their own side's
    against the commit-to-commit spread, at odds of wald(p); else the doubt. The spread
    and the sides' levels come from every commit of the part measured on either side."""
    unit = units(samples)
    a, b = part or (0, max(samples))
    near = [lo, *_beyond(lo, -1, a, verdicts), hi, *_beyond(hi, 1, b, verdicts)]
    for i in near:
        if i not in unit:
            return Doubt(i, (i,), f"#{i}, next to the pair, is not measured yet")
    old = sorted({i for i in unit if a <= i <= lo and verdicts.get(i) is Verdict.PASS} |
                 {i for i in near if i <= lo})
    new = sorted({i for i in unit if hi <= i <= b and verdicts.get(i) is Verdict.FAIL} |
                 {i for i in near if i >= hi})
    tau2 = between([[unit[i] for i in old], [unit[i] for i in new]])
    if tau2 is None:
        return None
    for i in near:
        own, other = (old, new) if i <= lo else (new, old)
        odds = _log_odds(unit[i], [unit[j] for j in own if j != i],
                         [unit[j] for j in other], tau2)
        if odds < seq.wald(rule.p):
            few = {j for j in near if len(numbers(samples[j])) < rule.block or
                   unit[j][1] >= RUNS_HELP * tau2}
            return Doubt(i, tuple(sorted(few)),
                         _why(i, i <= lo, unit, old, new, math.sqrt(tau2),
                              all_positive(samples)))
    return None


def _beyond(k: int, step: int, end: int, verdicts: Mapping[int, Verdict]) -> list[int]:
    """The BEYOND nearest commits past k towards end (step -1 or +1), end included, not
    known to be untestable."""
    out: list[int] = []
    i = k + step
    while (i - end) * step <= 0 and len(out) < BEYOND:
        if verdicts.get(i) is not Verdict.SKIP:
            out.append(i)
        i += step
    return out


def _why(i: int, is_old: bool, unit: Mapping[int, Unit], old: Sequence[int],
         new: Sequence[int], tau: float, positive: bool) -> str:
    base = statistics.fmean(unit[j][0] for j in old if j != i or len(old) == 1)
    at = lambda j: f"#{j} {seq.relative(unit[j][0] - base, base, positive):+.2%}"  # noqa: E731
    side = "old" if is_old else "new"
    return (f"the commits do not sit on two levels: a spread, not a step (#{i}, called "
            f"{side}, is not told apart from the other side once each build's own speed is "
            f"allowed for: builds of one side may spread by a standard deviation of up to "
            f"{seq.relative(tau, base, positive):.2%}; levels against the old side's: "
            + ", ".join(at(j) for j in sorted({*old, *new})) + ")")
