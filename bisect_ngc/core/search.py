"""The bisection as pure logic: verdicts in, next probes or an answer out.

Candidates are indices 0..n-1 on a first-parent path; 0 is the old endpoint and
n-1 the new one. The search looks for the first index whose outcome equals the new
endpoint's outcome, so finding a regression and finding a fix are the same search.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Collection, Mapping, Sequence


# What one bit of range left to search costs, in builds, when a cheap probe off the
# midpoint is weighed against a build at it. One bit is about one probe; counting it
# double saves as many builds with fewer rounds (benchmarks/overlays.py model).
BIT_COST = 2.0


class Verdict(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"


class Status(str, Enum):
    FOUND = "found"
    AMBIGUOUS = "ambiguous"
    INVALID_ENDPOINTS = "invalid-endpoints"
    NOT_IN_COMMITS = "not-in-commits"   # the images differ, builds of their commits do not


class RepeatPolicy(str, Enum):
    ANY = "any"            # one failing run makes the commit fail
    MAJORITY = "majority"  # the commoner of pass/fail wins; a tie is a skip


@dataclass(frozen=True)
class Round:
    """One round: test these indices next (at most `jobs` of them)."""

    indices: tuple[int, ...]


@dataclass(frozen=True)
class Result:
    status: Status
    first_new: int | None = None
    last_old: int | None = None
    candidates: tuple[int, ...] = ()
    explanation: str = ""
    old_outcome: Verdict | None = None
    new_outcome: Verdict | None = None
    skipped: tuple[int, ...] = field(default=())
    stopped_early: bool = False       # by skip_limit, before the search was done
    rests_on: tuple[tuple[int, str, Verdict], ...] = ()   # (index, tier, verdict) to re-run


def next_step(n: int, verdicts: Mapping[int, Verdict], jobs: int = 1,
              cheap: Mapping[int, float] | None = None) -> Round | Result:
    """Return the next probes, or the result once the verdicts settle the question.

    `cheap` gives some indices a cost below a build's 1.0 (an overlay of a built
    neighbour): a probe may move to one of them when the cost it saves outweighs the
    worse split. Which indices get probed changes; the answer cannot."""
    if n < 2:
        raise ValueError("need at least two candidates (the two endpoints)")
    if jobs < 1:
        raise ValueError("jobs must be >= 1")
    ends = tuple(i for i in (0, n - 1) if i not in verdicts)
    if ends:
        return Round(ends)
    old, new = verdicts[0], verdicts[n - 1]
    skipped = tuple(sorted(i for i, v in verdicts.items() if v is Verdict.SKIP))
    if Verdict.SKIP in (old, new) or old is new:
        return Result(Status.INVALID_ENDPOINTS, explanation=endpoint_problem(old, new),
                      old_outcome=old, new_outcome=new, skipped=skipped)

    lo, hi = open_interval(n, verdicts)
    inside = sorted(i for i in verdicts if lo < i < hi)  # all skips: no old/new lies inside
    n_untested = hi - lo - 1 - len(inside)
    if not n_untested:
        between = tuple(inside)
        if between:
            return Result(Status.AMBIGUOUS, first_new=None, last_old=lo,
                          candidates=between + (hi,),
                          explanation=f"{len(between)} untestable commit(s) lie between the last "
                                      "old-behaviour commit and the first new-behaviour commit",
                          old_outcome=old, new_outcome=new, skipped=skipped)
        return Result(Status.FOUND, first_new=hi, last_old=lo, candidates=(hi,),
                      old_outcome=old, new_outcome=new, skipped=skipped)
    return Round(_split(lo, hi, n_untested, verdicts, jobs, cheap or {}))


def next_in_subset(n: int, verdicts: Mapping[int, Verdict], subset: Collection[int],
                   jobs: int = 1) -> Round | None:
    """The next round that probes only indices of `subset` (what a cheaper tier can
    probe, e.g. the commits that have a prebuilt wheel), or None once that tier cannot
    narrow the range further. The same search, run on the subset's points inside the
    open interval, with the interval's ends as its endpoints."""
    ends = tuple(i for i in (0, n - 1) if i not in verdicts)
    if ends:
        mine = tuple(i for i in ends if i in subset)
        return Round(mine) if mine else None
    old, new = verdicts[0], verdicts[n - 1]
    if Verdict.SKIP in (old, new) or old is new:
        return None
    lo, hi = open_interval(n, verdicts)
    inner = sorted(i for i in set(subset) if lo < i < hi)
    if all(i in verdicts for i in inner):
        return None
    coarse = [lo, *inner, hi]
    step = next_step(len(coarse), {k: verdicts[i] for k, i in enumerate(coarse)
                                   if i in verdicts}, jobs)
    return Round(tuple(coarse[k] for k in step.indices)) if isinstance(step, Round) else None


def skip_limit(n: int, verdicts: Mapping[int, Verdict], max_skips: int | None) -> Result | None:
    """AMBIGUOUS once more than `max_skips` commits between the endpoints were untestable
    and the search is not done: a test that cannot run across a stretch is better told
    early than after probing every commit of it. None: go on."""
    if not max_skips:
        return None
    skipped = tuple(sorted(i for i, v in verdicts.items() if v is Verdict.SKIP and 0 < i < n - 1))
    old, new = verdicts.get(0), verdicts.get(n - 1)
    if len(skipped) <= max_skips or old is None or new is None or old is new or \
            Verdict.SKIP in (old, new):
        return None
    lo, hi = open_interval(n, verdicts)
    return Result(Status.AMBIGUOUS, last_old=lo, candidates=tuple(range(lo + 1, hi + 1)),
                  explanation=f"stopped after {len(skipped)} untestable commits (more than "
                              f"--max-skips {max_skips}); the first new-behaviour commit is "
                              f"one of the {hi - lo} after the last old-behaviour one",
                  old_outcome=old, new_outcome=new, skipped=skipped, stopped_early=True)


def open_interval(n: int, verdicts: Mapping[int, Verdict]) -> tuple[int, int]:
    """The last old-behaviour index before the first new-behaviour one, and that one;
    (0, n-1) until both endpoints behave differently."""
    old, new = verdicts.get(0), verdicts.get(n - 1)
    if old is None or new is None or old is new or Verdict.SKIP in (old, new):
        return 0, n - 1
    hi = min(i for i, v in verdicts.items() if v is new)
    lo = max(i for i, v in verdicts.items() if v is old and i < hi)
    return lo, hi


def endpoint_problem(old: Verdict, new: Verdict) -> str:
    if old is Verdict.SKIP and new is Verdict.SKIP:
        return "neither endpoint could be tested; check the build and test commands at both"
    if old is Verdict.SKIP:
        return "the old endpoint could not be tested; check the build and test commands there"
    if new is Verdict.SKIP:
        return "the new endpoint could not be tested; check the build and test commands there"
    return (f"both endpoints {'pass' if old is Verdict.PASS else 'fail'}, so the range holds no "
            "change of behaviour; check that the test really tells the two releases apart")


def _split(lo: int, hi: int, n_untested: int, verdicts: Mapping[int, Verdict],
           jobs: int, cheap: Mapping[int, float]) -> tuple[int, ...]:
    """Ideal points cut (lo, hi) into jobs+1 near-equal parts; each slot takes a point near its own."""
    if n_untested <= jobs:
        return tuple(i for i in range(lo + 1, hi) if i not in verdicts)
    width = hi - lo
    ideals = [lo + (width * j) // (jobs + 1) for j in range(jobs + 2)]
    ideals[-1] = hi
    runs = _skip_runs(lo, hi, verdicts)
    chosen: list[int] = []
    for j in range(1, jobs + 1):
        pick = _pick(ideals[j], ideals[j - 1], ideals[j + 1], lo, hi, verdicts, set(chosen),
                     runs, cheap)
        if pick is not None:
            chosen.append(pick)
    return tuple(sorted(chosen))


def _skip_runs(lo: int, hi: int, verdicts: Mapping[int, Verdict]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for i in sorted(i for i, v in verdicts.items() if v is Verdict.SKIP and lo < i < hi):
        if runs and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def _pick(ideal: int, left: int, right: int, lo: int, hi: int, verdicts: Mapping[int, Verdict],
          taken: set[int], runs: list[tuple[int, int]], cheap: Mapping[int, float]
          ) -> int | None:
    """The probe for one slot.

    With no untestable commit in the slot's window this is the untested index nearest the
    ideal point. Untestable commits come in stretches (a broken submodule, a bad merge), so
    near a stretch of L skipped commits the next ones are likely skipped too: each
    candidate is scored by the expected bits it leaves to find, with a skip chance that
    decays over L/2 commits from the stretch. The probe keeps to the middle half of the
    untested commits while a likely testable one is there, so that what it finds still
    halves what is left; a long stretch is jumped over instead of walked through. A cheap
    index adds its cost (a build is 1.0) to those bits, each bit costing BIT_COST builds.
    """
    ideal = min(max(ideal, lo + 1), hi - 1)
    left, right = max(left, lo), min(right, hi)
    local = [r for r in runs if r[1] > left and r[0] < right]
    cheap_here = [x for x in cheap if left < x < right]
    nearest = _nearest_untested(ideal, lo, hi, verdicts, taken)
    if not local and not cheap_here:
        return nearest
    cands = set(cheap_here) | ({nearest} if nearest is not None else set())
    band = _middle_half(left, right, verdicts, taken) if local else None
    if local:
        cands.update(range(left + 1, right, max(1, (right - left) // 128)))
        cands.add(ideal)
        cands.update(band[2] if band else ())
    for a, b in local:
        step = 1
        while step <= right - left:
            cands.update((a - step, b + step))
            step *= 2
    scored = [(x, _skip_chance(x, local)) for x in cands
              if left < x < right and x not in verdicts and x not in taken]
    # Between two skips with nothing tested in between, a commit is likely skipped too.
    middle = [(x, q) for x, q in scored if band and band[0] <= x <= band[1] and q < 0.5
              and not local[0][0] < x < local[-1][1]]
    span = right - left
    miss_cost = 1 + math.log2(span)
    best: tuple[float, int, int] | None = None
    for x, q in middle or scored:
        split = ((x - left) * math.log2(x - left) + (right - x) * math.log2(right - x)) / span
        score = (cheap.get(x, 1.0) + BIT_COST * (q * miss_cost + (1 - q) * split),
                 abs(x - ideal), x)
        if best is None or score < best:
            best = score
    return nearest if best is None else best[2]


def skip_chances(n: int, untestable: Collection[int]) -> list[float]:
    """How likely a try of each index gives no verdict: 1 for a known untestable one, and
    beside a stretch of them, the chance that decays away from it (a try of a commit is
    never written off entirely: 0.9 at most)."""
    runs = _skip_runs(-1, n, {i: Verdict.SKIP for i in untestable})
    return [1.0 if i in untestable else min(0.9, _skip_chance(i, runs)) for i in range(n)]


def _skip_chance(x: int, runs: list[tuple[int, int]]) -> float:
    """How likely x is untestable, from the nearest stretches of skips around it."""
    k = bisect.bisect_right([a for a, _ in runs], x)
    q = 0.0
    for a, b in runs[max(0, k - 1):k + 1]:
        dist = a - x if x < a else x - b
        q = max(q, math.exp(-2 * (dist - 1) / (b - a + 1)))
    return q


def _middle_half(left: int, right: int, verdicts: Mapping[int, Verdict], taken: set[int]
                 ) -> tuple[int, int, list[int]] | None:
    """The untested commits of (left, right) ranked in order: the indices of the first and
    last of the middle half, and of its quartiles. A probe keeps to them while it can, so
    that whatever it finds halves what is left to test; walking in from the edge of a
    stretch of skips one commit at a time would cost a probe per commit."""
    known = sorted(i for i in set(verdicts) | taken if left < i < right)
    total = right - left - 1 - len(known)
    if total < 4:
        return None
    ranks = (total // 4, total // 2, total - 1 - total // 4)
    at: list[int] = []
    for r in ranks:
        x = left + 1 + r
        k = 0
        while True:           # the r-th untested index: move past the known ones before it
            moved = bisect.bisect_right(known, x) - k
            if moved == 0:
                break
            k += moved
            x += moved
        at.append(x)
    return at[0], at[2], at


def _nearest_untested(ideal: int, lo: int, hi: int, verdicts: Mapping[int, Verdict],
                      taken: set[int]) -> int | None:
    ideal = min(max(ideal, lo + 1), hi - 1)
    for dist in range(0, hi - lo):
        for cand in (ideal - dist, ideal + dist):
            if lo < cand < hi and cand not in verdicts and cand not in taken:
                return cand
    return None


def combine_runs(runs: Sequence[Verdict], policy: RepeatPolicy = RepeatPolicy.ANY) -> Verdict:
    """One verdict for a commit from its repeated test runs.

    ANY: fail if any run failed, else pass if any passed, else skip.
    MAJORITY: the commoner of pass and fail (skips ignored); a tie is a skip.
    """
    fails = sum(v is Verdict.FAIL for v in runs)
    passes = sum(v is Verdict.PASS for v in runs)
    if policy is RepeatPolicy.ANY:
        return Verdict.FAIL if fails else Verdict.PASS if passes else Verdict.SKIP
    if fails == passes:
        return Verdict.SKIP
    return Verdict.FAIL if fails > passes else Verdict.PASS


def runs_settled(runs: Sequence[Verdict], total: int, policy: RepeatPolicy) -> bool:
    """True when the remaining runs cannot change combine_runs' answer."""
    left = total - len(runs)
    if left <= 0:
        return True
    if policy is RepeatPolicy.ANY:
        return Verdict.FAIL in runs
    fails = sum(v is Verdict.FAIL for v in runs)
    passes = sum(v is Verdict.PASS for v in runs)
    return abs(fails - passes) > left


def expected_rounds(n: int, jobs: int) -> int:
    """Rounds for a skip-free search: one for the endpoints, then (K+1)-ary narrowing."""
    return 1 + ceil_log(n - 1, jobs + 1)


def expected_probes(n: int, jobs: int) -> int:
    """Worst-case probes for a skip-free search."""
    if n <= 2:
        return n
    if jobs == 1:
        return 2 + ceil_log(n - 1, 2)
    return 2 + jobs * ceil_log(n - 1, jobs + 1)


def tiered_estimate(n: int, points: Collection[int], jobs: int) -> dict[str, int]:
    """What a plan expects when a prebuilt tier at `points` (indices, with both ends)
    narrows first: its probes and rounds, the widest stretch between two adjacent points
    that builds may be left with, and the builds' probes (both ends of that stretch
    probed again in the build environment, then the bisection) and rounds."""
    inner = sorted({0, n - 1} | {i for i in points if 0 < i < n - 1})
    widest = max(b - a for a, b in zip(inner, inner[1:]))
    return {"tier_probes": expected_probes(len(inner), jobs),
            "tier_rounds": expected_rounds(len(inner), jobs), "widest": widest,
            "build_probes": expected_probes(widest + 1, jobs),
            "build_rounds": expected_rounds(widest + 1, jobs)}


def ceil_log(x: int, base: int) -> int:
    """Smallest r with base**r >= x, in integers (no float rounding)."""
    r, p = 0, 1
    while p < x:
        p *= base
        r += 1
    return r


__all__ = ["Verdict", "Status", "RepeatPolicy", "Round", "Result", "next_step", "next_in_subset",
           "open_interval", "skip_limit", "tiered_estimate",
           "combine_runs", "runs_settled", "expected_rounds", "expected_probes", "ceil_log"]
