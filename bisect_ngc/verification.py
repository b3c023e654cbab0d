"""The answer, run again before it is given: the pair a bisection's answer rests on is
probed afresh, interleaved (one probe of each per round), until each has `verify` fresh
verdicts or twice as many tries. The answer stands only if every fresh verdict agrees
with the search's; otherwise it is ambiguous, with the runs. Pure, like search.py."""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

from .search import Result, Status, Verdict

# Fresh runs of each side of the answer, unless --verify says otherwise (0: none).
DEFAULT_VERIFY = 3


def claims(found: Result) -> tuple[tuple[int, Verdict], ...]:
    """(index, verdict) pairs the answer rests on."""
    if found.status is Status.FOUND and found.last_old is not None and \
            found.first_new is not None and found.old_outcome and found.new_outcome:
        return ((found.last_old, found.old_outcome), (found.first_new, found.new_outcome))
    return found.rests_on


def next_round(found: Result, fresh: Mapping[int, Sequence[Verdict]], verify: int
               ) -> tuple[int, ...]:
    """The indices to probe afresh next (empty: done)."""
    pairs = claims(found)
    if verify <= 0 or _disagreement(pairs, fresh):
        return ()
    return tuple(i for i, _ in pairs
                 if _ran(fresh.get(i, ())) < verify and len(fresh.get(i, ())) < 2 * verify)


def settle(found: Result, fresh: Mapping[int, Sequence[Verdict]], verify: int,
           n: int) -> Result:
    """The answer as the fresh verdicts leave it."""
    pairs = claims(found)
    if verify <= 0 or not pairs:
        return found
    runs = "; ".join(f"#{i} was {want.value}, again " +
                     (", ".join(v.value for v in fresh.get(i, ())) or "not run")
                     for i, want in pairs)
    wrong = _disagreement(pairs, fresh)
    short = [i for i, _ in pairs if _ran(fresh.get(i, ())) < verify]
    if wrong is None and not short:
        return found
    why = (f"run again, #{wrong} did not behave as the search saw it" if wrong is not None
           else f"#{short[0]} could not be run again {verify} time(s)")
    return replace(found, status=Status.AMBIGUOUS, first_new=None,
                   candidates=tuple(range(1, n)),
                   explanation=f"the answer did not hold up: {why} ({runs}); the test is "
                               f"flaky here: raise --repeat (or --repeat-policy majority) and "
                               f"run again")


def _ran(verdicts: Sequence[Verdict]) -> int:
    return sum(v is not Verdict.SKIP for v in verdicts)


def _disagreement(pairs, fresh: Mapping[int, Sequence[Verdict]]) -> int | None:
    return next((i for i, want in pairs
                 if any(v is not Verdict.SKIP and v is not want for v in fresh.get(i, ()))),
                None)
