"""The answer, run again before it is given: the probes an answer rests on (the found
pair; for "not in these commits", the release image and the build of its commit) are run
afresh, interleaved (one probe of each per round), until each has `verify` fresh
verdicts or twice as many tries. The answer stands only if every fresh verdict agrees
with the search's; otherwise it is ambiguous, with the runs. Pure, like search.py."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Collection, Mapping, Sequence

from .advice import kept_build, stale_cache
from .search import Result, Status, Verdict

# Fresh runs of each side of the answer, unless --verify says otherwise (0: none).
DEFAULT_VERIFY = 3

# What an answer rests on: (candidate index, the tier that probed it, its verdict).
Claim = tuple[int, str, Verdict]
Fresh = Mapping[tuple[int, str], Sequence[Verdict]]


def claims(found: Result, tier_of: Callable[[int], str]) -> tuple[Claim, ...]:
    """The probes the answer rests on; a found pair's, as the search last probed them."""
    if found.status is Status.FOUND and found.last_old is not None and \
            found.first_new is not None and found.old_outcome and found.new_outcome:
        return ((found.last_old, tier_of(found.last_old), found.old_outcome),
                (found.first_new, tier_of(found.first_new), found.new_outcome))
    return found.rests_on


def next_round(pairs: Sequence[Claim], fresh: Fresh, verify: int) -> tuple[Claim, ...]:
    """The claims to probe afresh next (empty: done)."""
    if verify <= 0 or _disagreement(pairs, fresh):
        return ()
    return tuple(c for c in pairs
                 if _ran(fresh.get(c[:2], ())) < verify and len(fresh.get(c[:2], ())) < 2 * verify)


def settle(found: Result, pairs: Sequence[Claim], fresh: Fresh, verify: int, n: int,
           cached: Mapping[int, str] | None = None, kept: Collection[int] = ()) -> Result:
    """The answer as the fresh verdicts leave it. `cached`: the claims whose search verdict
    came from an earlier session's cache, with their commits: a fresh run that contradicts
    one says the cached verdict may be stale, not that the test is flaky. `kept`: the
    claims re-checked on a kept build, which a build that installs elsewhere defeats."""
    if verify <= 0 or not pairs:
        return found
    runs = "; ".join(f"#{i} ({tier}) was {want.value}, again " +
                     (", ".join(v.value for v in fresh.get((i, tier), ())) or "not run")
                     for i, tier, want in pairs)
    wrong = _disagreement(pairs, fresh)
    short = [c for c in pairs if _ran(fresh.get(c[:2], ())) < verify]
    if wrong is None and not short:
        return found
    why = (f"run again, #{wrong[0]} ({wrong[1]}) did not behave as the search saw it"
           if wrong is not None else f"#{short[0][0]} could not be run again {verify} time(s)")
    stale_at = wrong[0] if wrong is not None else -1
    stale = (cached or {}).get(stale_at)
    advice = (f"#{stale_at}'s verdict came from the cache of an earlier session: "
              + stale_cache([stale])) if stale else \
        "the test is flaky here: raise --repeat (or --repeat-policy majority) and run again"
    if not stale and stale_at in kept:
        advice = f"{kept_build(stale_at)}; otherwise {advice}"
    return replace(found, status=Status.AMBIGUOUS, first_new=None,
                   candidates=tuple(range(1, n)),
                   explanation=f"the answer did not hold up: {why} ({runs}); {advice}")


def _ran(verdicts: Sequence[Verdict]) -> int:
    return sum(v is not Verdict.SKIP for v in verdicts)


def _disagreement(pairs: Sequence[Claim], fresh: Fresh) -> Claim | None:
    return next((c for c in pairs
                 if any(v is not Verdict.SKIP and v is not c[2] for v in fresh.get(c[:2], ()))),
                None)
