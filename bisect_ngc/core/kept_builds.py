"""A commit's build on this host, kept and reused (the local backend's build store).

A build is done once per (commit, build key): the re-checks of an answer, a changed
--test and a later session use it again. What a build made is what the test can see of
it: the files it wrote into $BISECT_ARTIFACTS (STATE/artifacts/<build key>/<commit>/,
kept where they are) and the files it left in the worktree, untracked or ignored or
edited (an extension built in place), kept as a tar next to them and put back into the
worktree, over a clean checkout, before each test. A build that leaves more than
TREE_LIMIT in the worktree is not kept: every probe builds it again, and the record says
why. A build that installs outside both (into a shared virtualenv, say) must run before
each test: --rebuild.
"""
from __future__ import annotations

import json
import os
import shutil
import tarfile
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import git

from ..vcs.mirrors import locked

TREE_LIMIT = 1 << 30
_SAFE: dict[str, Any] = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}


class KeptBuild:
    """The kept build of one commit under one build key; `artifacts` is its
    $BISECT_ARTIFACTS directory."""

    def __init__(self, artifacts: Path):
        self.artifacts = artifacts
        self.meta = artifacts.with_name(artifacts.name + ".kept.json")
        self.tree = artifacts.with_name(artifacts.name + ".tree.tar")

    def locked(self) -> AbstractContextManager[None]:
        """One build of a commit at a time, across sessions and processes."""
        return locked(self.artifacts)

    def facts(self) -> dict[str, Any] | None:
        """What was recorded when the build was kept; None: there is none to reuse."""
        try:
            facts = json.loads(self.meta.read_text())
        except (OSError, ValueError):
            return None
        if facts.get("tree") and not self.tree.is_file():
            return None
        return facts if isinstance(facts, dict) else None

    def restore(self, worktree: Path, keep: list[str]) -> dict[str, Any] | None:
        """Put the kept build's worktree files back (the --keep trees as they were after
        it); the facts it was kept with, or None where there is none."""
        facts = self.facts()
        if facts is None:
            return None
        if facts.get("tree"):
            for path in keep:
                shutil.rmtree(worktree / path, ignore_errors=True)
            with tarfile.open(self.tree) as tar:
                tar.extractall(worktree, **_SAFE)
        return facts

    def clear(self) -> None:
        """Before a fresh build: nothing of an earlier one stays."""
        self.meta.unlink(missing_ok=True)
        self.tree.unlink(missing_ok=True)
        shutil.rmtree(self.artifacts, ignore_errors=True)
        self.artifacts.mkdir(parents=True, exist_ok=True)

    def keep(self, worktree: Path, seconds: float | None) -> str | None:
        """Keep a successful build; a sentence for the record where it cannot be kept."""
        made = _made(worktree)
        size = sum(os.lstat(worktree / p).st_size for p in made)
        if size > TREE_LIMIT:
            return (f"the build left {size / 2**30:.1f} GiB in the worktree (over "
                    f"{TREE_LIMIT / 2**30:.0f} GiB): not kept, each probe of this commit "
                    "builds again")
        if made:
            partial = self.tree.with_name(self.tree.name + f".{os.getpid()}")
            with tarfile.open(partial, "w") as tar:
                for path in made:
                    tar.add(worktree / path, arcname=path, recursive=False)
            partial.replace(self.tree)
        partial = self.meta.with_name(self.meta.name + f".{os.getpid()}")
        partial.write_text(json.dumps({"build_s": seconds, "tree": bool(made),
                                       "files": len(made), "kept": time.time()}))
        partial.replace(self.meta)
        return None


def _made(worktree: Path) -> list[str]:
    """The worktree's files that are not the commit's: untracked or ignored, and tracked
    ones the build edited."""
    repo = git.Repo(worktree)
    others = repo.git.ls_files("-z", "--others").split("\0")
    edited = repo.git.diff("--name-only", "-z", "--no-renames").split("\0")
    return sorted({p for p in others + edited
                   if p and os.path.lexists(worktree / p) and not os.path.isdir(worktree / p)})


def kept_builds(state: Path) -> list[dict[str, Any]]:
    """The kept local builds of a state directory, as `cache ls` lists them."""
    rows = []
    for meta in sorted((state / "artifacts").glob("*/*.kept.json")):
        commit = meta.name.removesuffix(".kept.json")
        kept = KeptBuild(meta.with_name(commit))
        facts = kept.facts() or {}
        size = sum(f.stat().st_size for f in kept.artifacts.rglob("*") if f.is_file()) + \
            (kept.tree.stat().st_size if kept.tree.is_file() else 0)
        rows.append({"store": "local", "key": meta.parent.name, "commit": commit,
                     "image": None, "created": facts.get("kept"),
                     "build_s": facts.get("build_s"), "bytes": size,
                     "path": str(kept.artifacts)})
    return rows


def prune_kept(state: Path, older_than_s: float | None = None) -> tuple[int, int]:
    """Remove kept local builds (all, or those kept longer ago than the given age);
    returns (builds removed, bytes freed)."""
    now, count, freed = time.time(), 0, 0
    for row in kept_builds(state):
        if older_than_s is not None and now - (row["created"] or 0) <= older_than_s:
            continue
        kept = KeptBuild(Path(row["path"]))
        with kept.locked():
            kept.meta.unlink(missing_ok=True)
            kept.tree.unlink(missing_ok=True)
            shutil.rmtree(kept.artifacts, ignore_errors=True)
        count, freed = count + 1, freed + row["bytes"]
    return count, freed
