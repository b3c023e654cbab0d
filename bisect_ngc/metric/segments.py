"""Several changes in one range: the metric search over segments. Pure.

One change gives commits like old, then like new. Two changes in the same direction leave
commits between them like neither side, and a range that goes up and back down leaves
commits far from both ends; either way a commit like neither splits its segment in two,
each with its own ends as references, and each is searched for its own change
(comparator.judge on the segment), as Pinpoint does. A change found whose pair moves
the metric significantly less than its segment's ends do leaves the two sides of the pair
to search as well (confirmation.leftover; while the numbers only lean that way, the four
commits run again, within --max-runs). A segment whose ends do not differ by
--min-change holds no change worth naming. `plan` says what to run next or gives the
answer: every change found, each with its own pair confirmed (comparator.confirm), and
with Rule.steps, a lone change's pair checked as a step against each build's own speed
(steps.spread).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Iterator, Mapping

from . import sequential as seq
from . import steps
from .comparator import (ENDPOINT_RUNS, NO_NUMBER_TRIES, Call, Difference, Judgement, Rule,
                         Sample, all_positive, classify, guard, judge, machine_states, numbers,
                         references, settled)
from .confirmation import confirm, leftover
from .tails import Tail, worst_runs
from ..core.search import Result, Round, Status, Verdict, next_step


@dataclass(frozen=True)
class Plan:
    """`more`: commits to run again now (undecided, or an answer's pair being checked);
    `step`: the search's next commits; else the answer: `result` (None while the whole
    range's endpoints are not known to differ: `difference` says how they stand), and
    `changes`: (last old, first new) of every change found, the result's own first;
    `tail`: where the endpoints are done and do not differ, a change in some runs only."""

    more: tuple[int, ...] = ()
    step: tuple[int, ...] = ()
    result: Result | None = None
    changes: tuple[tuple[int, int], ...] = ()
    verdicts: dict[int, Verdict] = field(default_factory=dict)
    difference: Difference | None = None
    tail: Tail | None = None


def _part(a: int, b: int, samples: Mapping[int, Sample], attempts: Mapping[int, int]
          ) -> tuple[dict[int, Sample], dict[int, int]]:
    return ({i - a: s for i, s in samples.items() if a <= i <= b},
            {i - a: k for i, k in attempts.items() if a <= i <= b})


@dataclass
class _Search:
    """What the parts searched so far ask for, and what they found."""
    verdicts: dict[int, Verdict]
    more: set[int] = field(default_factory=set)
    step: set[int] = field(default_factory=set)
    found: list[tuple[int, int]] = field(default_factory=list)
    unplaced: list[Result] = field(default_factory=list)


def plan(n: int, samples: Mapping[int, Sample], attempts: Mapping[int, int],
         rule: Rule) -> Plan:
    whole = judge(n, samples, attempts, rule, settled(n, samples, rule))
    if whole.more or whole.difference is None or whole.difference.call != "differ":
        ends = next_step(n, whole.verdicts)      # an endpoint without numbers: the search says
        done = not whole.more and whole.difference is not None
        return Plan(more=whole.more, verdicts=dict(whole.verdicts),
                    result=ends if isinstance(ends, Result) and not whole.more and
                    whole.difference is None else None, difference=whole.difference,
                    tail=worst_runs(numbers(samples[0]), numbers(samples[n - 1]), rule.p,
                                    rule.lower_is_better) if done else None)
    acc = _Search(dict(whole.verdicts))
    todo = [(0, n - 1)]
    while todo:
        a, b = todo.pop(0)
        j = whole if (a, b) == (0, n - 1) else None
        todo += _search(a, b, n, j, samples, attempts, rule, acc)
    if acc.more or acc.step:
        return Plan(more=tuple(sorted(acc.more)), step=tuple(sorted(acc.step)),
                    verdicts=acc.verdicts, difference=whole.difference)
    return Plan(result=_answer(acc.found, acc.unplaced, acc.verdicts, n),
                changes=tuple(acc.found), verdicts=acc.verdicts, difference=whole.difference)


def passes(asked: tuple[int, ...], verdicts: Mapping[int, Verdict], n: int,
           samples: Mapping[int, Sample], attempts: Mapping[int, int], rule: Rule
           ) -> Iterator[tuple[int, ...]]:
    """A round: up to `block` passes, each one run of every commit it holds. The first runs
    the commits asked for and each end of the open interval (the drift guard,
    comparator.guard); each later pass, the round's commits that `plan` still asks for,
    read after the last pass (the caller adds its runs to samples and attempts): a commit
    far from one side costs one run, and an answer's pair asked for again runs together.
    A commit that sits out a pass sits out the rest of the round: its runs keep the pass
    numbers confirmation.passes gives them, so a pair compares runs taken side by side.
    Where one run two noise widths off a side's level would still be called that side
    (the sides many noise widths apart), a step's commits not yet run run once, alone: a
    run that decides needs no guard (the drift of rounds near it still corrects it,
    seq.offsets), and one that does not is asked for again, beside the guards, in the
    next round."""
    guards = guard(verdicts, n, attempts, rule)
    alone = bool(guards) and not any(attempts.get(i, 0) for i in asked) and \
        _one_run_decides(samples, verdicts, rule)
    todo = tuple(sorted(set(asked) | (set() if alone else set(guards))))
    for _ in range(1 if alone else rule.block):
        todo = tuple(i for i in todo if _runnable(i, samples, attempts, rule))
        if not todo:
            return
        yield todo
        more = plan(n, samples, attempts, rule).more
        todo = tuple(i for i in todo if i in more)


def _runnable(i: int, samples: Mapping[int, Sample], attempts: Mapping[int, int],
              rule: Rule) -> bool:
    """Whether i may run again: under --max-runs, and not a commit that keeps giving no
    number."""
    return attempts.get(i, 0) < rule.max_runs and \
        bool(samples.get(i) or attempts.get(i, 0) < NO_NUMBER_TRIES)


def _one_run_decides(samples: Mapping[int, Sample], verdicts: Mapping[int, Verdict],
                     rule: Rule) -> bool:
    """Whether one run RUN_OFF noise widths off either side's level, towards the other
    side, would still be called that side by itself."""
    positive = all_positive(samples)
    st = machine_states(samples, positive)
    refs = references(samples, verdicts)
    old, new = (seq.fold(seq.scaled(numbers(refs[v]), positive), st)
                for v in (Verdict.PASS, Verdict.FAIL))
    if not old or not new:
        return False
    lo, hi = seq.trimmed(old)[0], seq.trimmed(new)[0]
    off = math.copysign(RUN_OFF * (st.sigma if st else seq.noise([old, new])), hi - lo)
    return classify([lo + off], old, new, rule, rule.search_alpha, st) is Call.LIKE_OLD and \
        classify([hi - off], old, new, rule, rule.search_alpha, st) is Call.LIKE_NEW


RUN_OFF = 2.0


def _search(a: int, b: int, n: int, j: Judgement | None, samples: Mapping[int, Sample],
            attempts: Mapping[int, int], rule: Rule, acc: _Search) -> list[tuple[int, int]]:
    """One part a..b (j: the whole range's judgement, when it is the whole): what it asks
    for or found goes into acc; returns the parts it splits into."""
    sub, tries = (samples, attempts) if j else _part(a, b, samples, attempts)
    if j is None:
        j = judge(b - a + 1, sub, tries, rule, settled(b - a + 1, sub, rule),
                  keep=part_keep(rule))
        if j.more:
            acc.more |= {i + a for i in j.more}
            return []
        if j.difference is None or j.difference.call == "unknown":
            acc.unplaced.append(Result(
                Status.AMBIGUOUS, last_old=a, candidates=tuple(range(a + 1, b + 1)),
                explanation=f"whether #{a} .. #{b} holds a change too could not be told "
                            "within --max-runs"))
        if j.difference is None or j.difference.call != "differ":
            return []                   # no change worth naming between these two
        acc.verdicts.update({i + a: v for i, v in j.verdicts.items() if a < i + a < b})
    neither = sorted(i for i, c in j.calls.items() if c is Call.NEITHER)
    if neither:                         # the one nearest the middle splits the part
        k = a + min(neither, key=lambda i: abs(2 * i - (b - a)))
        return [(a, k), (k, b)]
    if j.more:
        acc.more |= {i + a for i in j.more}
        return []
    s = next_step(b - a + 1, j.verdicts)
    if isinstance(s, Round):
        acc.step |= {i + a for i in s.indices}
        return []
    checked = confirm(s, sub, tries, rule, j.verdicts, fresh_ends=(a, b) == (0, n - 1),
                      offset=a)
    if isinstance(checked, tuple):
        acc.more |= {i + a for i in checked}
    elif checked.status is Status.FOUND and checked.last_old is not None and \
            checked.first_new is not None:
        lo, hi = checked.last_old + a, checked.first_new + a
        more = leftover(a, b, lo, hi, samples, rule)    # more change than the pair's?
        ask = {i for i in (a, b, lo, hi) if attempts.get(i, 0) < rule.max_runs}
        if more is None and ask:
            acc.more |= ask
        elif more:
            acc.found.append((lo, hi))
            return [(x, y) for x, y in ((a, lo), (hi, b)) if y > x]
        elif not rule.steps or _a_step(lo, hi, a, b, j.verdicts, samples, attempts, rule,
                                       acc):
            acc.found.append((lo, hi))
    else:
        acc.unplaced.append(_shifted(checked, a))
    return []


def _a_step(lo: int, hi: int, a: int, b: int, verdicts: Mapping[int, Verdict],
            samples: Mapping[int, Sample], attempts: Mapping[int, int], rule: Rule,
            acc: _Search) -> bool:
    """Whether lo, hi (part a..b, whose own verdicts are given) stands as a step
    (steps.spread); if not, acc asks for the runs that could still tell, or holds the
    answer ambiguous over the part."""
    doubt = steps.spread(lo, hi, samples, {i + a: v for i, v in verdicts.items()}, rule,
                         (a, b))
    if doubt is None:
        return True
    runs = {i for i in doubt.runs if _runnable(i, samples, attempts, rule)}
    acc.more |= runs
    if not runs:
        acc.unplaced.append(Result(Status.AMBIGUOUS, last_old=a,
                                   candidates=tuple(range(a + 1, b + 1)), explanation=doubt.why))
    return False


def part_keep(rule: Rule) -> int:
    """Runs a split part's ends leave for their pair: a round, at most a third of
    --max-runs, and never so many that the ends cannot reach a look (ENDPOINT_RUNS)."""
    return max(0, min(rule.block, rule.max_runs // 3, rule.max_runs - ENDPOINT_RUNS))


def _shifted(r: Result, a: int) -> Result:
    move = lambda i: None if i is None else i + a          # noqa: E731
    return replace(r, first_new=move(r.first_new), last_old=move(r.last_old),
                   candidates=tuple(i + a for i in r.candidates),
                   skipped=tuple(i + a for i in r.skipped))


def _answer(found: list[tuple[int, int]], unplaced: list[Result],
            verdicts: Mapping[int, Verdict], n: int) -> Result:
    skipped = tuple(sorted(i for i, v in verdicts.items() if v is Verdict.SKIP))
    if found and not unplaced:
        lo, hi = found[0]
        more = "" if len(found) == 1 else (
            f"; {len(found)} changes in this range: " +
            ", ".join(f"#{h}" for _, h in found) + " (see the metric's changes)")
        return Result(Status.FOUND, first_new=hi, last_old=lo, candidates=(hi,),
                      old_outcome=Verdict.PASS, new_outcome=Verdict.FAIL, skipped=skipped,
                      explanation=f"first new-behaviour commit: #{hi}{more}")
    if unplaced:                        # every part left unplaced holds candidates
        first = unplaced[0]
        also = "" if not found else (
            "; a change was found at " + ", ".join(f"#{h}" for _, h in found))
        also += "".join(f"; also: {r.explanation}" for r in unplaced[1:])
        return replace(first, explanation=first.explanation + also,
                       candidates=tuple(sorted({c for r in unplaced for c in r.candidates})))
    return Result(Status.AMBIGUOUS, last_old=0, candidates=tuple(range(1, n)), skipped=skipped,
                  explanation="the change is spread over several commits: each part of "
                              "the range is smaller than --min-change")
