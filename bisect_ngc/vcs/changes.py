"""One path of a diff between two commits, as `git diff --raw -M` says it (pure: history.py
reads it, prebuilt/overlay.py decides on it)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Change:
    """One path of `git diff --raw -M B C`."""

    status: str                  # A, M, D, R (rename), T (type change), C (copy)
    path: str                    # the path in C (in B for a deletion)
    old_path: str | None = None  # renames and copies: the path in B
    old_mode: str = "100644"
    new_mode: str = "100644"
    old_blob: str = ""
    new_blob: str = ""
