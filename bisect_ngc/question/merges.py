"""A merge named as the answer: the branch it brought in, and the range that a bisection
inside it walks (`bisect` descends into it unless --no-descend, as cargo-bisect-rustc
descends into a rollup)."""
from __future__ import annotations

from ..core.inputs import Range
from ..vcs.history import History


def merged_branch(history: History, sha: str) -> tuple[str, str] | None:
    """(merge base, tip) of the branch that the merge `sha` brought in, or None when `sha`
    is not a merge of two parents, or brought in no commit of its own. The base is an
    ancestor of the merge's first parent, which behaved the old way; the tip may not
    behave the new way on its own (the change can come from the two sides together): a
    bisection of the branch then says its endpoints behave the same."""
    parents = history.repo.commit(sha).parents
    if len(parents) != 2:           # not a merge, or an octopus: no one branch to walk
        return None
    bases = history.repo.merge_base(parents[0], parents[1])
    if not bases or bases[0].hexsha == parents[1].hexsha:
        return None                 # the branch was in already (`-s ours`, merged twice)
    return bases[0].hexsha, parents[1].hexsha


def branch_range(history: History, merge: str) -> Range | None:
    """The range inside the merge `merge`: from the merge base to the tip it merged,
    first-parent, as `git bisect` without --first-parent would walk it; None where
    `merged_branch` finds no branch."""
    branch = merged_branch(history, merge)
    if branch is None:
        return None
    base, tip = branch
    return Range(history, base, tip, history.candidates(base, tip), history.identity(tip),
                 {"old": f"{base[:12]} (merge base)",
                  "new": f"{tip[:12]} (the branch merged by {merge[:12]})"})
