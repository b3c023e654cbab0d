"""Kept build trees and the clock.

A build tree kept between probes (setuptools' build/, cmake + ninja's, make's) decides what
to recompile by comparing timestamps: an output is current when no source is newer. The
checkout of the next commit gives every changed file the time of the checkout. That is
only "newer" when it is later than every kept output in the resolution the build tool
reads: setuptools before 70 reads whole seconds, so a checkout in the same second as the
last link reused the previous commit's extension (a broken commit "built and passed").
A tree written by a clock that runs ahead (another node, a skewed VM) is worse: its
outputs look current for as long as the skew lasts.

`settle` runs before a slot's checkout: it waits for the next whole second after the
newest kept file, or, when that file is dated beyond SKEW_LIMIT_S ahead of this host's
clock, removes the kept tree so that the build starts from the commit's sources alone.
"""
from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path
from typing import Callable, Iterable

SKEW_LIMIT_S = 2.0      # longer than the wait for the next second; shorter means a skewed clock
COARSE_CLOCK_S = 0.02   # the kernel stamps files from a clock up to a tick behind time.time()


def newest_mtime(paths: Iterable[Path], skip: frozenset[str] = frozenset({".git"})) -> float | None:
    """The latest modification time of any file or directory under `paths`."""
    newest: float | None = None
    stack = [str(p) for p in paths]
    while stack:
        top = stack.pop()
        try:
            st = os.lstat(top)
        except OSError:
            continue
        newest = st.st_mtime if newest is None else max(newest, st.st_mtime)
        if not os.path.isdir(top) or os.path.islink(top):
            continue
        try:
            with os.scandir(top) as entries:
                for entry in entries:
                    if entry.name in skip:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        try:
                            mtime = entry.stat(follow_symlinks=False).st_mtime
                        except OSError:
                            continue
                        newest = mtime if newest is None else max(newest, mtime)
        except OSError:
            continue
    return newest


def settle(kept: Iterable[Path], *, clock: Callable[[], float] = time.time,
           sleep: Callable[[float], None] = time.sleep) -> str | None:
    """Make the coming checkout's files newer, in whole seconds, than everything in the
    kept trees. Returns a sentence for the probe record when a tree had to go."""
    kept = [Path(p) for p in kept]
    newest = newest_mtime(kept)
    if newest is None:
        return None
    wait = math.floor(newest) + 1 + COARSE_CLOCK_S - clock()
    if wait <= 0:
        return None
    if wait <= SKEW_LIMIT_S:
        sleep(wait)
        return None
    for path in kept:
        if path.is_dir() and not path.is_symlink():
            _empty(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    return (f"removed the kept build tree: its newest file is dated {wait:.0f} s ahead of "
            f"this host's clock, so its outputs would look newer than this commit's sources")


def _empty(directory: Path) -> None:
    """Remove what is inside, keeping the directory itself (it may be a mount point)."""
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
