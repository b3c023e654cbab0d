"""Probe worktrees the tool owns: one lane of slots per running process.

Worktrees are registered in a repository the tool owns, never in the user's own clone
(which would list them in `git worktree list`, and keep them as stale entries once the
state is deleted): a mirror in the cache, or for a local clone a bare `home.git` per
project that borrows objects (alternates) from the clones it was given. Its alternates
list is made current by every process that uses it: the clone given now comes first, and
clones that no longer exist are dropped, so a fork, a second clone or a deleted first
clone never breaks a probe.

Several bisections of one project may run at once: each process holds a lane
(`lane-K/`, an exclusive lock released by the kernel when it dies) and checks out its
slots there, so two sessions never share a worktree; a lane left free is taken again by
the next process, with its kept build trees.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import threading
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import git

from ..errors import UserError
from .mirrors import CheckoutError, last_line, locked

if TYPE_CHECKING:
    from .history import History
    from .submodules import SubmoduleCache

# A process's lanes, by project directory: held for the process's lifetime and shared by
# every Worktrees of that project in it (release mode makes a second backend, say).
_HELD: dict[Path, tuple[int, int]] = {}
_TAKING = threading.Lock()


class Worktrees:
    """The probe slots of one project (`base`: STATE/worktrees/<root commit>), in the lane
    this process holds."""

    def __init__(self, history: "History", base: Path,
                 submodules: "SubmoduleCache | None" = None):
        self.history = history
        self.base = base
        self.submodules = submodules     # a shared object cache; None: `git submodule update`
        self._home: git.Repo | None = None

    @property
    def lane(self) -> int:
        key = self.base.resolve()
        with _TAKING:                          # a round's threads ask at once
            if key not in _HELD:
                _HELD[key] = take_lane(self.base)
                old = tuple(p for p in self.base.glob("slot-*") if p.is_dir())
                if old:                        # slots an older version kept under base
                    remove_lane(Lane(self.base, old, False))
            return _HELD[key][0]

    @property
    def root(self) -> Path:
        return self.base / f"lane-{self.lane}"

    @property
    def name(self) -> str:
        """A name for this lane that no other project's or lane's shares."""
        return f"{self.base.name}-lane{self.lane}"

    def path(self, slot: int | str) -> Path:
        return self.root / f"slot-{slot}"

    @property
    def home(self) -> git.Repo:
        if self._home is None:
            self._home = self.history.repo if self.history.owned else self._borrowing_home()
        return self._home

    def git_dirs(self) -> list[Path]:
        """The git directories a worktree's git needs besides its own admin directory:
        the home, the clone given now, and the other clones its objects come from."""
        home = Path(self.home.common_dir).resolve()
        lent = [Path(line).parent for line in _alternates(home)]
        return list(dict.fromkeys([home, self.history.common_dir, *lent]))

    def _borrowing_home(self) -> git.Repo:
        home = self.base / "home.git"
        with locked(home):
            if not (home / "HEAD").exists():
                partial = home.with_name(home.name + ".partial")
                shutil.rmtree(partial, ignore_errors=True)
                repo = git.Repo.init(partial, bare=True)
                user = self.history.repo
                # Relative submodule URLs resolve against the first remote, as in the clone.
                url = user.remotes[0].url if user.remotes else \
                    str(self.history.common_dir.parent)
                repo.git.remote("add", "origin", url)
                partial.rename(home)
            _borrow_from(home, self.history.common_dir / "objects")
        return git.Repo(home)

    @staticmethod
    def admin_dir(wt: Path) -> Path | None:
        """The worktree's own directory inside the repository's git directory."""
        pointer = wt / ".git"
        if not pointer.is_file():
            return None
        target = pointer.read_text().strip().removeprefix("gitdir:").strip()
        path = Path(target) if Path(target).is_absolute() else (wt / target)
        return path.resolve()

    def _shared(self) -> AbstractContextManager[None]:
        """Worktree bookkeeping is the home's, which other runs may share (a cache mirror)."""
        return locked(Path(self.home.common_dir) / "bisect-ngc-worktrees")

    def remove(self, slot: int | str) -> None:
        wt = self.path(slot)
        if wt.exists():
            with self._shared():
                try:
                    self.home.git.worktree("remove", "--force", str(wt))
                except git.GitCommandError:
                    shutil.rmtree(wt, ignore_errors=True)
                    self.home.git.worktree("prune")

    def _registered_here(self, wt: Path) -> bool:
        admin = self.admin_dir(wt)
        return admin is not None and (admin / "gitdir").is_file() and \
            admin.parent.parent == Path(self.home.common_dir).resolve()

    def checkout(self, slot: int | str, sha: str, *, clean: bool = True,
                 keep: tuple[str, ...] = (), submodules: bool = True) -> Path:
        """Put slot's worktree at sha, removing untracked files except the `keep` paths
        (a build tree, say); raises CheckoutError for per-commit failures."""
        wt = self.path(slot)
        if not self._registered_here(wt):       # new, or made by an older version in the clone
            _unregister(wt)       # an entry an older version made in the user's clone
            shutil.rmtree(wt, ignore_errors=True)
            wt.parent.mkdir(parents=True, exist_ok=True)
            with self._shared():
                self.home.git.worktree("prune")
                self.home.git.worktree("add", "--detach", "--force", str(wt), sha)
        tree = git.Repo(wt)
        try:
            tree.git.checkout("--detach", "--force", sha)
            if clean:
                excludes = [arg for path in keep for arg in ("-e", "/" + path.strip("/"))]
                tree.git.clean("-ffdxq", *excludes)
        except git.GitCommandError as exc:
            raise CheckoutError(f"checkout failed: {last_line(exc)}") from None
        if not (submodules and (wt / ".gitmodules").is_file()):
            return wt
        if self.submodules is not None:
            self.submodules.update(tree, sha)
        else:
            try:
                tree.git.submodule("sync", "--recursive")
                tree.git.submodule("update", "--init", "--recursive", "--force")
            except git.GitCommandError as exc:
                raise CheckoutError(f"submodule update failed: {last_line(exc)}") from None
        return wt


def _alternates(home: Path) -> list[str]:
    try:
        text = (home / "objects" / "info" / "alternates").read_text()
    except OSError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip()]


def _borrow_from(home: Path, objects: Path) -> None:
    """The clone given now first, then the other clones that still exist; written whole
    (a reader never sees half a list). The caller holds locked(home)."""
    wanted = [str(objects.resolve())]
    wanted += [line for line in _alternates(home) if line not in wanted and Path(line).is_dir()]
    if wanted == _alternates(home):
        return
    info = home / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    tmp = info / f"alternates.{os.getpid()}"
    tmp.write_text("".join(f"{line}\n" for line in wanted))
    tmp.replace(info / "alternates")


def take_lane(base: Path) -> tuple[int, int]:
    """The lowest lane of `base` no live process holds: (its number, the locked fd). A
    lock file that `gc` removed under us is taken again from its new file."""
    base.mkdir(parents=True, exist_ok=True)
    k = 0
    while True:
        lock = base / f"lane-{k}.lock"
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            k += 1
            continue
        except OSError as exc:
            os.close(fd)
            raise UserError(f"cannot lock {lock}: {exc.strerror} (a network filesystem "
                            "without locks?)", hint="mount it with locking (Lustre: -o "
                            "flock), or pass --state on a local disk") from None
        try:
            if os.path.samestat(os.fstat(fd), os.stat(lock)):
                os.set_inheritable(fd, False)
                return k, fd
        except FileNotFoundError:
            pass
        os.close(fd)


def release_lanes() -> None:
    """Give back this process's lanes (a command that ends lets the next one take them)."""
    with _TAKING:
        for _, fd in _HELD.values():
            os.close(fd)
        _HELD.clear()


@dataclass(frozen=True)
class Lane:
    """A lane on disk, as `gc` sees it: its directory and slots, whether a live process
    holds it, and its size in bytes."""

    path: Path
    slots: tuple[Path, ...]
    in_use: bool

    @property
    def size(self) -> int:
        return sum(_size(slot) for slot in self.slots)


def lanes(base: Path) -> list[Lane]:
    """The lanes of one project directory, with a directory or a lock (the slots an
    older version kept directly under `base` count as one lane, free)."""
    names = {p.name.removesuffix(".lock") for p in base.glob("lane-*")}
    found = []
    for name in sorted(names, key=lambda n: int(n[5:]) if n[5:].isdigit() else -1):
        path = base / name
        slots = tuple(sorted(p for p in path.glob("slot-*") if p.is_dir()))
        found.append(Lane(path, slots, _held(base / f"{name}.lock")))
    old = tuple(sorted(p for p in base.glob("slot-*") if p.is_dir()))
    if old:
        found.append(Lane(base, old, False))
    return found


def remove_lane(lane: Lane) -> bool:
    """Delete a free lane's worktrees, holding its lock meanwhile (a bisection that
    starts now takes another lane), and each one's entry in the repository it was
    registered in (the home, a mirror, or the clone where an older version put it):
    those entries alone. False where a live process holds the lane."""
    fd = None
    if lane.path.name.startswith("lane-"):
        lock = lane.path.with_name(lane.path.name + ".lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
    try:
        for slot in lane.slots:
            _unregister(slot)
            shutil.rmtree(slot, ignore_errors=True)
        if fd is not None:
            shutil.rmtree(lane.path, ignore_errors=True)
            lane.path.with_name(lane.path.name + ".lock").unlink(missing_ok=True)
    finally:
        if fd is not None:
            os.close(fd)
    return True


def _unregister(wt: Path) -> None:
    admin = Worktrees.admin_dir(wt)
    try:
        mine = admin is not None and \
            Path((admin / "gitdir").read_text().strip()).resolve() == (wt / ".git").resolve()
    except OSError:
        return
    if mine and admin is not None:
        shutil.rmtree(admin, ignore_errors=True)


def _held(lock: Path) -> bool:
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _size(path: Path) -> int:
    total = 0
    for top, dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(top, f)).st_size
            except OSError:
                pass
    return total
