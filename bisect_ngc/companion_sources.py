"""Where git companions come from: their revisions resolved to commits through the
tool's git mirrors, and a fresh checkout for each build (a build tree reused across
torches would mix objects compiled against two ABIs)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import git

from .companions import Companion
from .errors import UserError
from .git_mirrors import last_line
from .history import History


class CompanionSources:
    def __init__(self, cache_dir: Path):
        self.cache_dir = cache_dir
        self._open: dict[str, History] = {}

    def _history(self, c: Companion) -> History:
        if c.source not in self._open:
            self._open[c.source] = History.open(c.source, self.cache_dir, blobless=False)
        return self._open[c.source]

    def resolve(self, c: Companion) -> Companion:
        """The companion with its revision resolved to a commit (git companions)."""
        if c.kind != "git" or c.commit:
            return c
        try:
            commit = self._history(c).resolve(c.rev)
        except UserError as exc:
            raise UserError(f"--with {c.name}@{c.rev}: {exc.message}",
                            hint=f"check the revision; {c.source} is where it is looked "
                                 "up") from None
        return replace(c, commit=commit)

    def checkout(self, c: Companion, dest: Path) -> None:
        """A clone of the companion at its commit in `dest`, with its submodules where it
        has them. Self-contained (no alternates): a container or a node that sees only
        `dest` can still run git in it, as builds that stamp their version do."""
        source = self._history(c).common_dir
        try:
            repo = git.Repo.clone_from(str(source), dest, multi_options=["--no-checkout"])
            repo.git.checkout("--detach", c.commit)
            if c.submodules:
                repo.git.submodule("update", "--init", "--recursive", "--depth", "1")
        except git.GitCommandError as exc:
            raise CheckoutFailed(f"could not check out {c.label}: {last_line(exc)}") from None


class CheckoutFailed(Exception):
    """A companion that cannot be checked out: the probe's skip."""
