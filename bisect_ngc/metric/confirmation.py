"""The answer's own evidence, for metric verdicts: its pair called again by fresh runs
(`confirm`), how far the pair's commits lie apart (`pair`), whether a range holds change
outside the pair (`leftover`), and a change's share of the whole (`share`). Pure."""
from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Mapping

from . import sequential as seq
from .comparator import (NEAR_ERRORS, Call, Difference, Rule, Sample, Shift, all_positive,
                         classify, corrected, machine_states, numbers, references, settled_at)
from ..core.search import Result, Status, Verdict


# Fresh runs an endpoint of the answer's pair needs (no answer rests on one run), and an
# interior commit of it where one could mislead (see fresh_call; more where runs are
# wild): where one run in seven sits in a second clock state as far off as the change,
# two such runs in a row read as the other side (1 session in 50); three, 1 in 300.
CONFIRM_RUNS = 2


def passes(sample: Sample) -> list[tuple[int, int]]:
    """Each run's (round, pass): a round runs each commit once a pass, so runs of one pass
    lie close in time (a run without a number shifts its commit's later passes of that
    round; those runs are still of the round)."""
    seen: Counter[int] = Counter()
    out = []
    for r, _ in sample:
        seen[r] += 1
        out.append((r, seen[r]))
    return out


def pair(lo: int, hi: int, samples: Mapping[int, Sample], rule: Rule, sign: int = 0
         ) -> Difference | None:
    """How far hi lies from lo, by their runs of the same pass of the rounds that measured
    both (None if no round did): a machine whose speed sticks for a while is then in the
    same state on both sides, whatever each commit ran besides. Judged with the noise of
    every commit measured, or the spread of the pair's own differences (`_own_noise`),
    from two passes or more (one can hold a switch of state between its two runs): the
    trimmed mean of their differences (seq.paired), "differ" when significant at p,
    one-sided, in the direction of the endpoints' change (`sign`, else
    `direction(samples)`). With two clock states each commit is taken at its own level
    (seq.fold), and one measured in one spell reads it as its level: the runs as taken
    must then favour the change over none as well (seq.paired_llr), by odds of PAIRED."""
    positive = all_positive(samples)
    st = machine_states(samples, positive)
    raw = {i: seq.scaled(numbers(s), positive) for i, s in samples.items() if s}
    folded = {i: seq.fold(v, st) for i, v in raw.items()}
    s, dof = seq.pooled(list(folded.values()))
    if st:
        s = st.sigma
    keys = {i: passes(samples[i]) for i in (lo, hi)}
    runs = [dict(zip(keys[i], folded[i])) for i in (lo, hi)]
    common = set(runs[0]) & set(runs[1])
    if not common:
        return None
    a, b = ([side[k] for k in sorted(common)] for side in runs)
    s, dof = _own_noise(a, b, s, dof)
    sign = sign or direction(samples)
    # the two-sided 1 - 2p interval: its bound on the endpoints' side is the one-sided
    # test's, so "differ" and an interval clear of 0 are one statement
    delta, low, high, p = seq.paired([y - x for x, y in zip(a, b)], s, dof, 2 * rule.p)
    base = statistics.median(v for k, v in zip(keys[lo], numbers(samples[lo])) if k in runs[1])
    rel = lambda v: seq.relative(v, base, positive)        # noqa: E731
    one_sided = p / 2 if delta * sign > 0 else 1 - p / 2
    x, y = (dict(zip(keys[i], raw[i])) for i in (lo, hi))
    as_taken = [y[k] - x[k] for k in sorted(common)]
    call = "differ" if one_sided <= rule.p and len(common) >= 2 and (
        not st or seq.paired_llr(as_taken, delta, st) >= PAIRED) else "unknown"
    return Difference(call, one_sided, Shift(rel(delta), rel(low), rel(high), 1 - 2 * rule.p),
                      len(a), len(b))


def _own_noise(a: list[float], b: list[float], s: float, dof: int) -> tuple[float, int]:
    """The noise of a pair's runs: the spread of its own differences, pass by pass, where
    that is wider than s (an F test at 5%: a machine that switched state within a pass,
    or commits measured each within one spell look tight), else s with it pooled in, never
    lower than s. The spread is Winsorized as the trimmed mean it serves is trimmed: a
    spike in one pass in ten no longer widens it fivefold."""
    from scipy import stats
    if len(a) < 2:
        return s, dof
    var, k = seq.spread([y - x for x, y in zip(a, b)])
    own = var / 2
    if float(stats.f.sf(own / max(s * s, seq.FLOOR ** 2), k, dof)) <= 0.05:
        return math.sqrt(own), k
    return max(s, math.sqrt((dof * s * s + k * own) / (dof + k))), dof + k


def direction(samples: Mapping[int, Sample]) -> int:
    """+1 where the new endpoint (the last commit measured) lies above the old, else -1."""
    positive = all_positive(samples)
    st = machine_states(samples, positive)
    old, new = (seq.fold(seq.scaled(numbers(samples[i]), positive), st)
                for i in (0, max(samples)))
    return 1 if seq.trimmed(new)[0] >= seq.trimmed(old)[0] else -1


PAIRED = seq.wald(0.2)     # odds of 4 to 1: the runs as taken must favour the change


def fresh_call(i: int, samples: Mapping[int, Sample], verdicts: Mapping[int, Verdict],
               rule: Rule) -> Call:
    """i's call again, at error rates p / 10, on its runs after the first ones that made
    its call (runs in the order they were taken): the runs that made a decision cannot
    check it, for they are the ones that happened to lean. (An answer is wrong only when
    its pair was called wrong and this check then agrees with that call.) Unknown while i
    is no side's on all its runs; on a machine whose runs are wild (seq.wild: a share of
    them in a second state, or a tail, a quarter of the shift or more off) while fewer
    than CONFIRM_RUNS fresh runs exist, or while the deciding run and every fresh one
    could all have fallen there more often than p / 10; and while fewer exist and i's
    runs lie off its side's level (near it only by a quarter of the shift)."""
    positive = all_positive(samples)
    st = machine_states(samples, positive)
    x, old, new = corrected(samples[i], references(samples, verdicts, leave_out=i), positive, st)
    values = numbers(x)
    call = classify(values, old, new, rule, rule.search_alpha, st)
    if call not in (Call.LIKE_OLD, Call.LIKE_NEW):  # then no later runs alone can confirm it
        return call
    made = next((k for k in range(1, len(values) + 1)
                 if classify(values[:k], old, new, rule, rule.search_alpha, st) is call),
                len(values))
    fresh = values[made:]
    share = seq.wild([seq.scaled(numbers(s), positive) for s in samples.values() if s],
                     abs(seq.trimmed(new)[0] - seq.trimmed(old)[0]) / 4)
    if share and (len(fresh) < CONFIRM_RUNS or share ** (len(fresh) + 1) > rule.p / 10):
        return Call.UNKNOWN
    side = new if call is Call.LIKE_NEW else old
    if len(fresh) < CONFIRM_RUNS and not st and \
            seq.apart(values, side, seq.noise([old, new, values])) > NEAR_ERRORS:
        return Call.UNKNOWN
    return classify(fresh, old, new, rule, rule.p / 10, st)


def confirm(found: Result, samples: Mapping[int, Sample], attempts: Mapping[int, int],
            rule: Rule, verdicts: Mapping[int, Verdict], fresh_ends: bool = True,
            offset: int = 0) -> Result | tuple[int, ...]:
    """The answer's own evidence, fresh: each commit of the pair (last old, first new) that
    is not an endpoint is called the same way again by runs taken after its decision
    (`fresh_call`), and the pair differs (`pair`), an endpoint with its runs after the
    endpoints' decision (`fresh_ends`; a part of a range split by segments.plan has ends
    compared side by side since its split). Returns the result (ambiguous, with the
    numbers, if that fails within --max-runs), or the commits that need more runs.
    `offset`: where a part's commit 0 is in the whole range (the words name the range's)."""
    if found.status is not Status.FOUND or found.last_old is None or found.first_new is None:
        return found
    lo, hi = found.last_old, found.first_new
    n = max(samples) + 1
    want = {lo: Call.LIKE_OLD, hi: Call.LIKE_NEW}
    more = tuple(i for i in (lo, hi) if i not in (0, n - 1) and
                 fresh_call(i, samples, verdicts, rule) is not want[i])
    # An endpoint in the pair counts only its runs after the endpoints' decision: the ones
    # before made it, and may have leant (a false difference would then name a commit).
    # (One at --max-runs already cannot get them: the answer is then ambiguous.)
    since = (settled_at(n, samples, rule) or (None, -1))[1] if fresh_ends else -1
    fresh = {i: [(r, v) for r, v in s if i not in (lo, hi) or i not in (0, n - 1) or r > since]
             for i, s in samples.items()}
    more += tuple(i for i in (lo, hi) if i in (0, n - 1) and len(fresh[i]) < CONFIRM_RUNS)
    # the direction from every run: an end's fresh runs alone may sit in one spell
    d = pair(lo, hi, fresh, rule, direction(samples)) if all(fresh[i] for i in (lo, hi)) \
        else None
    if not more and d is not None and d.call == "differ":
        return found
    if not more or d is None or d.n_old < 2:    # the pair runs together, a pass in common
        more = (lo, hi)
    more = tuple(i for i in more if attempts.get(i, 0) < rule.max_runs)
    if more:
        return more
    return Result(Status.AMBIGUOUS, last_old=lo, candidates=(hi,), old_outcome=found.old_outcome,
                  new_outcome=found.new_outcome, skipped=found.skipped,
                  explanation=f"the search ends between #{lo + offset} and #{hi + offset}, "
                              "but fresh runs of "
                              f"them do not keep them apart" +
                              (f": {d.describe(rule)}" if d else "") +
                              "; the change may be spread over several commits")


def leftover(a: int, b: int, lo: int, hi: int, samples: Mapping[int, Sample],
             rule: Rule) -> bool | None:
    """Whether a to b changes by more than the pair lo to hi does, in a to b's direction,
    significantly at p (one-sided, the noise of every commit measured) and by at least
    --min-change: the segment holds another change besides the pair's worth naming (a
    machine that drifted a little between rounds is not one). None: not yet, but the
    runs lean that way (at least --min-change, one-sided p under LEFTOVER_LEAN): more
    runs of the four commits may tell."""
    from scipy import stats
    positive = all_positive(samples)
    st = machine_states(samples, positive)
    folded = {i: seq.fold(seq.scaled(numbers(s), positive), st)
              for i, s in samples.items() if s}
    s, dof = seq.pooled(list(folded.values()))
    s = st.sigma if st else s
    m = {i: seq.trimmed(folded[i])[0] for i in (a, b, lo, hi)}
    sign = 1 if m[b] >= m[a] else -1
    parts = [(b, hi), (lo, a)]          # (b - hi) + (lo - a): the change outside the pair
    used = {i for x, y in parts if x != y for i in (x, y)}
    if not used:
        return False
    delta = sign * sum(m[x] - m[y] for x, y in parts)
    se = 1.25 * s * math.sqrt(sum(1 / len(folded[i]) for i in used))
    big = abs(seq.relative(delta, statistics.median(numbers(samples[a])), positive))
    p = float(stats.t.sf(delta / se, dof))
    if big >= rule.min_change and p <= rule.p:
        return True
    return None if delta > 0 and big >= rule.min_change and p <= LEFTOVER_LEAN else False


LEFTOVER_LEAN = 0.2


def share(part: float, total: float) -> float:
    """A change's share of the total, both relative changes: on a log scale (two +5% steps
    are half each of +10.25%), or as they are where a change reaches -100% (a metric
    that crosses zero)."""
    if part > -1 and total > -1 and math.log1p(total):
        return math.log1p(part) / math.log1p(total)
    return part / total if total else 0.0
