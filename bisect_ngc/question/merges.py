"""A merge named as the answer, looked into (`bisect` descends unless --no-descend, as
cargo-bisect-rustc descends into a rollup).

The answer M was compared with one of its parents, P, which behaved the old way. What M
brought in came from its other parents. For each other parent T, the branch is the chain
from where it left P's history (a merge base of P and T) up to T
(`History.candidates`: every commit there is a child of the one before, so a sync
merge puts no untested base under it). The branch's answer stands in for M only when the
branch's ends behave as the outer ends did: its base the old way, its tip the new way
(for --metric, a change in the same direction and of a comparable size). Otherwise, or
when no branch commit alone shows the change, M itself is the answer, with the reason.
The answer is looked into again while it is a merge, at any depth.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Sequence

from ..core.belief import Prior
from ..core.engine import Bisection
from ..core.inputs import Range
from ..core.records import SessionResult
from ..vcs.history import History

MAX_DEPTH = 16


@dataclass
class Level:
    """One merge looked into: the branch searched and what it gave."""

    merge: str                     # the merge a search named
    parent: str                    # the parent it was compared with (it behaved old)
    base: str | None = None        # the branch searched: from here ...
    tip: str | None = None         # ... to here (a parent of `merge`)
    session: str | None = None     # the branch's session
    status: str = "not searched"   # the branch search's status
    found: str | None = None       # the branch's answer, when it stands in for the merge
    why: str = ""                  # why the merge stays the answer, where it does
    change: int = 0                # 0: the answer's; k: the k-th of a --metric `changes`
    tried: list[dict[str, Any]] = field(default_factory=list)  # every branch searched
    also: list[str] = field(default_factory=list)  # an octopus's other branches' answers
    old_side: bool = False         # a branch's answer was already in the old side
    look_inside: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def branches(history: History, merge: str, parent: str) -> list[tuple[str, str]]:
    """(base, tip) for each parent of `merge` other than `parent`: the tip, and each
    merge base of it with `parent` (several after criss-cross merges), nearest first.
    Empty for a commit that is not a merge, or a branch that was in already."""
    out = []
    for tip in (p.hexsha for p in history.repo.commit(merge).parents):
        if tip == parent or history.is_ancestor(tip, parent):
            continue
        bases = [b.hexsha for b in history.repo.merge_base("--all", parent, tip)]
        out += [(base, tip) for base in sorted(
            bases, key=lambda b: -int(history.repo.git.rev_list("--count", b)))]
    return out


def branch_range(history: History, merge: str, base: str, tip: str) -> Range:
    return Range(history, base, tip, history.candidates(base, tip), history.identity(tip),
                 {"old": f"{base[:12]} (where the branch left)",
                  "new": f"{tip[:12]} (the branch merged by {merge[:12]})"})


def disagrees(outer: SessionResult, inner: SessionResult) -> str | None:
    """Why the branch's answer cannot stand in for the merge, or None when it can (an
    ambiguous answer inside the branch, its ends as the outer's, stands as ambiguous)."""
    if inner.status not in ("found", "ambiguous"):
        return (f"the branch searched on its own: {inner.status}"
                + (f" ({inner.explanation})" if inner.explanation else "")
                + "; the change may need both sides of the merge")
    if outer.metric or inner.metric:
        a = ((outer.metric or {}).get("culprit") or {}).get("change")
        b = ((inner.metric or {}).get("endpoints") or {}).get("change")
        if a is None or b is None:
            return "the branch's change could not be compared with the merge's"
        if (a > 0) != (b > 0):
            return (f"the branch changes the other way ({b:+.1%}, the merge {a:+.1%}): it "
                    "answers another question")
        if not 0.5 <= b / a <= 2.0:
            return (f"the branch's change ({b:+.1%}) is not the size of the merge's "
                    f"({a:+.1%})")
        return None
    if (inner.old_outcome, inner.new_outcome) != (outer.old_outcome, outer.new_outcome):
        return (f"the branch's ends behave the other way round (its base {inner.old_outcome}, "
                f"its tip {inner.new_outcome}): it answers another question")
    return None


Run = Callable[[Range, str, Prior | None], tuple[Bisection, SessionResult]]


def informed(result: SessionResult) -> Prior | None:
    """The branch is searched with the same test: its belief starts from what the runs so
    far said of it: how likely it is deterministic (never above 99.9%), how often the new
    side showed its behaviour, and that it showed both behaviours (so branch ends that
    pass alike run again before they are believed)."""
    b = result.belief
    if not b:
        return None
    base = Prior()
    shown = b["new_side_runs"] - b["new_side_missed"]
    return replace(base, deterministic=min(0.999, b["deterministic"]), differed=True,
                   shows=(base.shows[0] + shown, base.shows[1] + b["new_side_missed"]))


def descend(history: History, outer: SessionResult, run: Run,
            look_inside: Callable[[str, str], list[str]]) -> list[Level]:
    """Look into each change the search found while it is a merge: the answer, and with
    --metric every further change it found, each on its own. `run(range, why, prior)`
    bisects a branch (a session of its own); `look_inside(base, tip)` is the command line
    that does the same by hand. Per change, its last level's `found` is the commit, or
    the last merge stays when it has none."""
    levels: list[Level] = []
    for change, start in _changes(outer):
        levels += _descend_one(history, start, run, look_inside, change)
    return levels


def _changes(outer: SessionResult) -> list[tuple[int, SessionResult]]:
    """The answer (0), then each further change a --metric search found (k: the k-th of
    its `changes`), as an answer of its own: the same direction check applies to each."""
    out = [(0, outer)]
    for k, c in enumerate((outer.metric or {}).get("changes", []), 1):
        if c["first_new"] != outer.first_new:
            out.append((k, replace(outer, first_new=c["first_new"], last_old=c["last_old"],
                                   metric=dict(outer.metric or {},
                                               culprit={"change": c["change"]}))))
    return out


def _descend_one(history: History, answer: SessionResult, run: Run,
                 look_inside: Callable[[str, str], list[str]], change: int,
                 olds: tuple[str | None, ...] = (), depth: int = 0) -> list[Level]:
    """The levels below `answer` while it is a merge. A branch's answer that is a merge
    which only brought in what the old side had (and fixed) is not the change: the next
    branch or base is tried, else the merge stays."""
    merge, parent = answer.first_new, answer.last_old
    if answer.status != "found" or not merge or not parent or depth >= MAX_DEPTH:
        return []
    ways = branches(history, merge, parent)
    if not ways:
        return []
    olds = (*olds, parent)
    level = Level(merge, parent, change=change)
    below: list[Level] = []
    answered = False
    for base, tip in ways:
        if answered and tip == level.tip:
            continue                    # another base of a branch already answered
        bis, inner = run(branch_range(history, merge, base, tip),
                         f"the answer {merge[:12]} is a merge: bisecting the branch it "
                         f"merged, {base[:12]}..{tip[:12]} (--no-descend stops at the "
                         "merge)", informed(answer))
        why = disagrees(answer, inner) or _in_old_side(history, inner, olds)
        deeper: list[Level] = []
        if not why and not answered:
            deeper = _descend_one(history, inner, run, look_inside, change, olds, depth + 1)
            if deeper and deeper[0].old_side and not deeper[0].found:
                why = (f"{OLD_SIDE} {(inner.first_new or '')[:12]} is a merge that brought in "
                       "what the old side had and fixed, not this change")
        level.tried.append({"base": base, "tip": tip, "session": bis.sid,
                            "status": inner.status, "why": why})
        if why and deeper:              # the levels looked into below it, counted still
            level.tried += [dict(t, within=lv.merge) for lv in deeper for t in lv.tried]
        level.old_side = level.old_side or why.startswith(OLD_SIDE)
        if answered:
            if not why and inner.first_new:
                level.also.append(inner.first_new)  # an octopus: another branch shows it
            continue
        level.base, level.tip, level.session, level.status, level.why = \
            base, tip, bis.sid, inner.status, why
        if not why:
            answered, level.found, below = True, inner.first_new, deeper
    level.look_inside = look_inside(level.base, level.tip) if level.base and level.tip else []
    return [level, *below]


OLD_SIDE = "the branch's answer"


def _in_old_side(history: History, inner: SessionResult, olds: Sequence[str | None]) -> str:
    """Why a branch's answer cannot be the change: it is already in the old side (an
    ancestor of a parent that behaved old), so the branch shows something the old side
    had and fixed. Empty when it is not."""
    first = inner.first_new
    if inner.status != "found" or not first:
        return ""
    for old in olds:
        if old and (first == old or history.is_ancestor(first, old)):
            return (f"{OLD_SIDE} {first[:12]} is already in {old[:12]}, which "
                    "behaved the old way: the branch shows something the old side has and "
                    "fixed, not this change")
    return ""
