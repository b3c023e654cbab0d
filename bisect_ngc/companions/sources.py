"""Where git companions come from: their revisions resolved to commits through the
tool's git mirrors, and a fresh checkout for each build (a build tree reused across
torches would mix objects compiled against two ABIs)."""
from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import git

from .specs import Companion
from ..errors import UserError
from ..vcs.mirrors import last_line
from ..vcs.history import History


class CompanionSources:
    def __init__(self, cache_dir: Path):
        self.cache_dir = cache_dir
        self._open: dict[str, History] = {}

    def _history(self, c: Companion) -> History:
        if c.source not in self._open:
            self._open[c.source] = History.open(c.source, self.cache_dir, blobless=False)
        return self._open[c.source]

    def resolve(self, c: Companion) -> Companion:
        """The companion with its revision resolved to a commit (git companions), or with
        its content named (wheels): a wheel rebuilt under the same file name is another
        companion, and cached verdicts of the old one do not answer for it."""
        if c.kind == "wheel":
            return replace(c, content=wheel_content(c))
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


def wheel_content(c: Companion) -> str:
    """A local wheel's sha256; a URL wheel's `#sha256=` fragment, else its size, ETag and
    Last-Modified as the server gives them (a HEAD request, no download)."""
    path = c.local_wheel
    if path is not None:
        if not path.is_file():
            raise UserError(f"--with {c.source}: no such wheel", hint="check the path")
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return "sha256=" + digest.hexdigest()
    url, _, fragment = c.source.partition("#")
    if fragment.startswith("sha256="):
        return fragment
    import requests          # only a URL wheel needs it (a headless start loads no HTTP)
    try:
        head = requests.head(url, allow_redirects=True, timeout=30)
        head.raise_for_status()
    except requests.RequestException as exc:
        raise UserError(f"--with {c.source}: cannot read the wheel's size and ETag "
                        f"({type(exc).__name__})",
                        hint="name its content instead: append #sha256=HEX to the URL") from None
    facts = [head.headers.get(h) for h in ("Content-Length", "ETag", "Last-Modified")]
    if not any(facts[1:]):
        raise UserError(f"--with {c.source}: the server names no ETag or Last-Modified, so a "
                        f"changed wheel could not be told from the old one",
                        hint="append #sha256=HEX to the URL")
    return "size={},etag={},modified={}".format(*facts)


class CheckoutFailed(Exception):
    """A companion that cannot be checked out: the probe's skip."""
