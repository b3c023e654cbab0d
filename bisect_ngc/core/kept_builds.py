"""A commit's build on this host, kept and reused (the local backend's build store).

A build is done once per (commit, build key): the re-checks of an answer, a changed
--test and a later session use it again. What a build made is what the test can see of
it: the files it wrote into $BISECT_ARTIFACTS (STATE/artifacts/<build key>/<commit>/,
kept where they are) and what it changed in the worktree (untracked or ignored files and
directories, edited and deleted tracked files), kept as a tar next to them and put back
over a clean checkout before each test. A build is not kept (every probe of the commit
builds again, and the record says why) when it leaves more than TREE_LIMIT in the
worktree, changes a submodule, or cannot be written; one whose files name the worktree's
own path (a CMake cache, an editable install) is put back only into that worktree. A
build that installs outside the worktree and $BISECT_ARTIFACTS (a shared virtualenv)
must run before each test: --rebuild.

Tests hold a shared lock on the commit's build while they run, builds an exclusive one:
another session never clears a build under a running test. Waits poll, so an
interruption is never stuck behind another session's build.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import tarfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import git

TREE_LIMIT = 1 << 30
_SAFE: dict[str, Any] = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}


class KeptBuild:
    """The kept build of one commit under one build key; `artifacts` is its
    $BISECT_ARTIFACTS directory."""

    def __init__(self, artifacts: Path):
        self.artifacts = artifacts
        self.meta = artifacts.with_name(artifacts.name + ".kept.json")
        self.tree = artifacts.with_name(artifacts.name + ".tree.tar")
        self.lock = artifacts.with_name(artifacts.name + ".lock")

    @contextmanager
    def locked(self, exclusive: bool, stop: Callable[[], bool] = lambda: False
               ) -> Iterator[None]:
        """Hold the commit's build lock: shared while a test reads it, exclusive while a
        build writes it. `stop` is polled while waiting (an interruption)."""
        self.lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while True:
                try:
                    fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                                | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if stop():
                        raise InterruptedError("interrupted while waiting for a build")
                    time.sleep(0.1)
            yield
        finally:
            os.close(fd)

    def facts(self) -> dict[str, Any] | None:
        """What was recorded when the build was kept; None: there is none to reuse."""
        try:
            facts = json.loads(self.meta.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(facts, dict) or (facts.get("tree") and not self.tree.is_file()):
            return None
        return facts

    def usable(self, worktree: Path) -> dict[str, Any] | None:
        """The facts, where the kept build can be put back into `worktree`."""
        facts = self.facts()
        if facts is None or (facts.get("bound") and facts.get("worktree") != str(worktree)):
            return None
        return facts

    def restore(self, worktree: Path, keep: list[str]) -> None:
        """Put the kept build's worktree changes back (the --keep trees as they were
        after it); the caller holds the lock and checked `usable`."""
        facts = self.facts() or {}
        if facts.get("tree"):
            for path in keep:
                shutil.rmtree(worktree / path, ignore_errors=True)
            with tarfile.open(self.tree) as tar:
                tar.extractall(worktree, **_SAFE)
        for path in facts.get("deleted", []):
            (worktree / path).unlink(missing_ok=True)

    def clear(self) -> None:
        """Before a fresh build: nothing of an earlier one stays (exclusive lock held)."""
        self.drop()
        self.artifacts.mkdir(parents=True, exist_ok=True)

    def drop(self) -> None:
        self.meta.unlink(missing_ok=True)
        self.tree.unlink(missing_ok=True)
        shutil.rmtree(self.artifacts, ignore_errors=True)

    def keep(self, worktree: Path, seconds: float | None) -> str | None:
        """Keep a successful build (exclusive lock held); a sentence for the record
        where it is not kept."""
        try:
            made, deleted, why = _changes(worktree)
            if why:
                return why
            size = sum(_size(worktree / p) for p in made)
            if size > TREE_LIMIT:
                return (f"the build left {size / 2**30:.1f} GiB in the worktree (over "
                        f"{TREE_LIMIT / 2**30:.0f} GiB)")
            bound = _names(worktree, made)
            if made:
                partial = self.tree.with_name(f"{self.tree.name}.{os.getpid()}")
                with tarfile.open(partial, "w") as tar:
                    for path in made:
                        tar.add(worktree / path, arcname=path)
                partial.replace(self.tree)
            partial = self.meta.with_name(f"{self.meta.name}.{os.getpid()}")
            partial.write_text(json.dumps({
                "build_s": seconds, "tree": bool(made), "files": len(made),
                "deleted": deleted, "bound": bound, "worktree": str(worktree),
                "kept": time.time()}))
            partial.replace(self.meta)
        except OSError as exc:            # a full disk, say: build again next time
            for leftover in self.artifacts.parent.glob(f"{self.artifacts.name}.*.{os.getpid()}"):
                leftover.unlink(missing_ok=True)
            self.meta.unlink(missing_ok=True)
            return f"could not keep it: {exc.strerror or exc}"
        return None


def _changes(worktree: Path) -> tuple[list[str], list[str], str | None]:
    """What the build changed in the worktree: paths to keep (files, symlinks and wholly
    untracked directories, empty ones too, and edited tracked files), tracked files it
    deleted, and why it cannot be kept (a submodule it changed)."""
    repo = git.Repo(worktree)
    tracked: set[str] = set()
    subs: set[str] = set()
    for entry in repo.git.ls_files("-z", "-s").split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            (subs if meta.startswith("160000") else tracked).add(path)
    for sub in sorted(subs):
        if (worktree / sub / ".git").exists() and \
                git.Repo(worktree / sub).git.status("--porcelain", "--ignored"):
            return [], [], f"the build changed the submodule {sub}"
    holders = {str(parent) for path in tracked | subs for parent in Path(path).parents}
    made = []
    for top, dirs, files in os.walk(worktree):
        rel = os.path.relpath(top, worktree)
        for d in list(dirs):
            path = os.path.normpath(os.path.join(rel, d))
            if path in subs or path == ".git":
                dirs.remove(d)
            elif os.path.islink(os.path.join(top, d)) or path not in holders:
                made.append(path)          # a symlink, or a directory git has nothing in
                dirs.remove(d)
        made += [p for f in files
                 if (p := os.path.normpath(os.path.join(rel, f))) not in tracked and p != ".git"]
    edited = repo.git.diff("--name-only", "-z", "--diff-filter=MT", "--no-renames").split("\0")
    deleted = repo.git.diff("--name-only", "-z", "--diff-filter=D", "--no-renames").split("\0")
    made += [p for p in edited if p and p not in subs]
    return sorted(set(made)), sorted(p for p in deleted if p), None


def _names(worktree: Path, made: list[str]) -> bool:
    """Whether a kept file holds the worktree's own path (it may then only go back there)."""
    needle = str(worktree).encode()
    for rel in made:
        top = worktree / rel
        for path in [top] if not top.is_dir() or top.is_symlink() else \
                [p for p in top.rglob("*") if p.is_file() and not p.is_symlink()]:
            try:
                if path.is_symlink():
                    if needle in os.readlink(path).encode():
                        return True
                    continue
                with open(path, "rb") as f:
                    tail = b""
                    while chunk := f.read(1 << 20):
                        if needle in tail + chunk:
                            return True
                        tail = chunk[-len(needle):]
            except OSError:
                continue
    return False


def _size(path: Path) -> int:
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*"))


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
    """Remove kept local builds (all, or those kept longer ago than the given age),
    waiting for tests that use them; returns (builds removed, bytes freed)."""
    now, count, freed = time.time(), 0, 0
    for row in kept_builds(state):
        if older_than_s is not None and now - (row["created"] or 0) <= older_than_s:
            continue
        kept = KeptBuild(Path(row["path"]))
        with kept.locked(exclusive=True):
            kept.drop()
        count, freed = count + 1, freed + row["bytes"]
    return count, freed
