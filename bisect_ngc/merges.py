"""A merge named as the answer: the branch it brought in, where a bisection of that branch
starts and ends, and the command that runs it (`--first-parent` stops at the merge)."""
from __future__ import annotations

from .history import History


def merged_branch(history: History, sha: str) -> tuple[str, str] | None:
    """(merge base, tip) of the branch that the merge `sha` brought in, or None when `sha`
    is not a merge. The base is an ancestor of the merge's first parent, which behaved
    the old way; the tip may not behave the new way on its own (the change can come
    from the two sides together): a bisection of the branch then says its endpoints
    behave the same."""
    parents = history.repo.commit(sha).parents
    if len(parents) < 2:
        return None
    bases = history.repo.merge_base(parents[0], parents[1])
    return (bases[0].hexsha, parents[1].hexsha) if bases else None
