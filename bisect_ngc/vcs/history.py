"""The git side: repositories, revisions, first-parent candidates, metadata (the probes'
worktrees are in worktrees.py)."""
from __future__ import annotations

import codecs
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import git

from ..errors import UserError
from .mirrors import clone_mirror, is_url, last_line, locked, mirror_path, redact_url
from .changes import Change

# A revision as git takes it (any letters, `fix/café` and CJK names included), but never
# one read as an option (a leading -), nor whitespace, control characters or globs.
_REV_RE = re.compile(r"^[^\s\x00-\x1f\x7f\\?*\[-][^\s\x00-\x1f\x7f\\?*\[]*$")
_SHA_RE = re.compile(r"^[0-9a-f]{4,40}$")
_PR_TITLE_RE = re.compile(r"\(#(\d+)\)")
_PR_MERGE_RE = re.compile(r"^Merge pull request #(\d+) from ")       # GitHub's merge button
_PR_TRAILER_RE = re.compile(r"^Pull Request resolved:\s*\S*?/pull/(\d+)", re.M)


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    title: str
    author: str
    date: str
    pr: int | None

    @property
    def short(self) -> str:
        return self.sha[:12]


def validate_rev(rev: str) -> str:
    """Reject anything that could be read as an option or is not a plausible revision."""
    if not rev or not _REV_RE.match(rev) or ".." in rev:
        raise UserError(f"'{rev}' is not a valid git revision",
                        hint="give a commit sha, a tag or a branch name")
    return rev


def parse_pr(message: str) -> int | None:
    title = message.splitlines()[0] if message else ""
    found = _PR_TITLE_RE.findall(title) or _PR_MERGE_RE.findall(title)
    if found:
        return int(found[-1])
    trailer = _PR_TRAILER_RE.search(message)
    return int(trailer.group(1)) if trailer else None


class History:
    """A repository opened (or cloned once into the cache) for bisecting."""

    def __init__(self, repo: git.Repo, origin: str, owned: bool = False):
        self.repo = repo
        self.origin = redact_url(origin)     # for display and reports: never credentials
        self.owned = owned                   # a mirror in the cache, not the user's clone

    @classmethod
    def open(cls, spec: str, cache_dir: Path, *, blobless: bool = True) -> "History":
        if is_url(spec):
            return cls(_clone_once(spec, cache_dir, blobless), spec, owned=True)
        path = Path(spec).expanduser()
        if not path.exists():
            raise UserError(f"repository '{spec}' does not exist",
                            hint="give a local path or a clone URL (--repo, or --torch-repo "
                                 "in release mode)")
        try:    # as git does, a directory inside a checkout names that checkout
            repo = git.Repo(path, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise UserError(f"'{spec}' is not inside a git repository",
                            hint="give a git checkout or a directory in one (--repo, or "
                                 "--torch-repo in release mode)") from None
        return cls(repo, str(Path(repo.working_tree_dir or repo.git_dir).resolve()))

    @staticmethod
    def at_hand(spec: str, cache_dir: Path) -> bool:
        """Whether open() needs no network: a local path, or a URL cloned into the cache."""
        return not is_url(spec) or (mirror_path(cache_dir / "repos", spec) / "HEAD").exists()

    @property
    def git_dir(self) -> Path:
        return Path(self.repo.git.rev_parse("--absolute-git-dir"))

    @property
    def common_dir(self) -> Path:
        """The repository's git directory (a bare mirror's top, or a checkout's .git)."""
        return Path(self.repo.common_dir).resolve()

    def web_origin(self) -> str:
        """Where the project lives, for links: the URL it was cloned from, or the
        `upstream`/`origin` remote of a local clone; credentials removed."""
        if is_url(self.origin):
            return self.origin
        for name in ("upstream", "origin"):
            if name in [r.name for r in self.repo.remotes]:
                return redact_url(self.repo.remotes[name].url)
        return self.origin

    def identity(self, rev: str) -> str:
        """A name for the project that survives clones: its root commit."""
        roots = self.repo.git.rev_list("--max-parents=0", rev).split()
        return sorted(roots)[0]

    def resolve(self, rev: str) -> str:
        validate_rev(rev)
        sha = self._rev_parse(rev)
        if sha is None and self._can_fetch():
            self.fetch(rev)
            sha = self._rev_parse(rev)
        if sha is None:
            raise UserError(f"revision '{rev}' is not in {self.origin}",
                            hint="this clone is shallow: `git fetch --unshallow` in it may "
                                 "bring it" if self.shallow() else
                            "check the sha or fetch the branch that has it")
        return sha

    def _rev_parse(self, rev: str) -> str | None:
        try:
            return self.repo.git.rev_parse("--verify", "--quiet", f"{rev}^{{commit}}")
        except git.GitCommandError as exc:
            if "ambiguous" in str(exc):
                raise UserError(f"short sha '{rev}' is ambiguous",
                                hint="give more hex digits of the commit") from None
            return None

    def _can_fetch(self) -> bool:
        return bool(self.repo.remotes)

    def fetch(self, rev: str | None = None) -> None:
        remote = self.repo.remotes[0]
        try:
            if rev and _SHA_RE.match(rev) and len(rev) == 40:
                self.repo.git.fetch(remote.name, rev)
            else:
                self.repo.git.fetch(remote.name, "--tags")
        except git.GitCommandError:
            pass  # resolve() reports the missing revision

    def is_partial(self) -> bool:
        """A blobless (partial) clone: file contents come from the remote on demand."""
        try:
            found = self.repo.git.config("--get-regexp",
                                         r"^(extensions\.partialclone|remote\..*\.promisor)$")
        except git.GitCommandError:
            return False
        return any(line.split()[-1] not in ("false", "") for line in found.splitlines())

    def missing(self, old: str, new: str) -> list[str]:
        """Objects the range needs that this partial clone lacks: every file of OLD's tree
        and every one changed up to NEW."""
        found: list[str] = []
        for args in (("--no-walk", old), (new, f"^{old}")):
            out = self.repo.git.rev_list("--objects", "--missing=print", "--no-object-names",
                                         *args)
            found += [line[1:] for line in out.splitlines() if line.startswith("?")]
        return sorted(set(found))

    def prefetch(self, old: str, new: str) -> int:
        """Fetch what the range's checkouts need in one request, so that no probe goes to
        the network for its files; returns how many objects were fetched."""
        if not self.is_partial():
            return 0
        wanted = self.missing(old, new)
        if not wanted:
            return 0
        with tempfile.TemporaryFile("w+b") as oids:
            oids.write("".join(f"{oid}\n" for oid in wanted).encode())
            oids.seek(0)
            try:
                self.repo.git.execute(
                    ["git", "fetch", "--no-tags", "--no-write-fetch-head",
                     "--recurse-submodules=no", "--filter=blob:none", "--stdin",
                     self.repo.remotes[0].name], istream=oids)
            except git.GitCommandError:
                return 0     # each checkout fetches what it needs, as before
        return len(wanted)

    def is_ancestor(self, old: str, new: str) -> bool:
        try:
            self.repo.git.merge_base("--is-ancestor", old, new)
            return True
        except git.GitCommandError:
            return False

    def candidates(self, old: str, new: str) -> list[str]:
        """OLD, then a chain of commits up to NEW, oldest first, each a child of the one
        before it: NEW's first-parent path, and where OLD is not on that path, the path
        through the parent that holds OLD (the merge that brought OLD in, then OLD's own
        branch). So the commit before an answer is always its real parent."""
        if old == new:
            raise UserError("the old and new revisions are the same commit",
                            hint="pick two different commits to bisect between")
        out = self.repo.git.rev_list("--first-parent", "--reverse", "--parents", new, f"^{old}")
        lines = out.splitlines()
        # Fast path: OLD is the first parent of the oldest listed commit, so it is on
        # the path and the path is a chain; otherwise ask merge-base (slower).
        if bool(lines) and lines[0].split()[1:2] == [old]:
            return [old] + [line.split()[0] for line in lines]
        if not self.is_ancestor(old, new):
            raise UserError(f"{old[:12]} is not an ancestor of {new[:12]}",
                            hint=self._unrelated_hint(old, new))
        return self._chain(old, new)

    def _chain(self, old: str, new: str) -> list[str]:
        """From NEW down to OLD through first parents, stepping to another parent only
        where the first does not hold OLD (the commits between hold OLD: --ancestry-path)."""
        rows = self.repo.git.rev_list("--ancestry-path", "--parents", new, f"^{old}")
        parents = {row.split()[0]: row.split()[1:] for row in rows.splitlines()}
        chain, at = [], new
        while at != old:
            chain.append(at)
            at = next(p for p in parents[at] if p == old or p in parents)
        return [old] + chain[::-1]

    def parent_number(self, child: str, parent: str) -> int:
        """Which parent of CHILD is PARENT: 1 for the first, 2 for a merge's second; 0
        where it is none of them."""
        shas = [p.hexsha for p in self.repo.commit(child).parents]
        return shas.index(parent) + 1 if parent in shas else 0

    def shallow(self) -> bool:
        return self.repo.git.rev_parse("--is-shallow-repository") == "true"

    def _unrelated_hint(self, old: str, new: str) -> str:
        """What to do when OLD is not an ancestor of NEW: unshallow, swap, or start from
        where the two lines of history meet."""
        if self.shallow():
            return ("this clone is shallow, so git may not see how they are related: run "
                    "`git fetch --unshallow` in it, then the same command")
        if self.is_ancestor(new, old):
            return "swap --old and --new: the new revision is the older one"
        try:
            base = self.repo.git.merge_base(old, new).split()[0]
        except (git.GitCommandError, IndexError):
            return "they share no history: pick two commits of one project"
        return (f"they have diverged since {base[:12]}, where they meet: bisect from there "
                f"(--old {base[:12]}) if it behaves as --old does")

    def info(self, shas: list[str]) -> dict[str, CommitInfo]:
        """Title, author, date and PR of each commit, read through gitpython's long-lived
        `git cat-file --batch` (no process per call)."""
        infos = {}
        for sha in shas:
            c = self.repo.commit(sha)
            message = self._message(c)
            first = message.strip().split("\n\n", 1)[0]
            title = " ".join(line.strip() for line in first.splitlines())   # as git's %s
            infos[c.hexsha] = CommitInfo(c.hexsha, title, f"{c.author.name} <{c.author.email}>",
                                         c.authored_datetime.isoformat(), parse_pr(message))
        return infos

    def _message(self, c: git.Commit) -> str:
        """The message in the encoding its `encoding` header names, as git log shows it
        (gitpython reads every message as UTF-8)."""
        head, _, body = self.repo.odb.stream(c.binsha).read().partition(b"\n\n")
        named = [line[9:].decode("ascii", "replace") for line in head.split(b"\n")
                 if line.startswith(b"encoding ")]
        try:
            return body.decode(codecs.lookup(named[0]).name if named else "utf-8", "replace")
        except LookupError:
            return body.decode("utf-8", "replace")

    def changes(self, old: str, new: str) -> list[Change]:
        """What differs from `old` to `new`, file by file, renames found (`git diff --raw -M`)."""
        out = self.repo.git.diff("--raw", "-z", "-M", "--no-abbrev", "--no-ext-diff", old, new,
                                 "--")
        fields = out.split("\0")
        found, k = [], 0
        while k < len(fields) and fields[k].startswith(":"):
            old_mode, new_mode, old_blob, new_blob, status = fields[k][1:].split(" ")
            if status[0] in "RC":
                found.append(Change(status[0], fields[k + 2], fields[k + 1], old_mode,
                                    new_mode, old_blob, new_blob))
                k += 3
            else:
                found.append(Change(status[0], fields[k + 1], None, old_mode, new_mode,
                                    old_blob, new_blob))
                k += 2
        return found

    def blob(self, sha: str) -> bytes:
        """A file's contents by blob id (fetched on demand in a blobless clone)."""
        return self.repo.odb.stream(bytes.fromhex(sha)).read()

    def present(self, revs: list[str]) -> dict[str, str | None]:
        """The commit each rev names, or None where this repository lacks it, without fetching.
        One long-lived `git cat-file --batch-check` answers them all."""
        found: dict[str, str | None] = {}
        for rev in revs:
            try:
                sha, kind, _ = cast("tuple[bytes, bytes, int]", self.repo.git.get_object_header(f"{validate_rev(rev)}^{{commit}}"))
                found[rev] = sha.decode() if kind == b"commit" else None
            except (UserError, ValueError):
                found[rev] = None
        return found


def _clone_once(url: str, cache_dir: Path, blobless: bool) -> git.Repo:
    dest = mirror_path(cache_dir / "repos", url)
    if (dest / "HEAD").exists():
        return git.Repo(dest)
    with locked(dest):
        if not (dest / "HEAD").exists():
            try:
                clone_mirror(url, dest, ["--mirror"] + (["--filter=blob:none"] if blobless
                                                        else []))
            except git.GitCommandError as exc:
                raise UserError(f"could not clone {redact_url(url)}: "
                                f"{redact_url(last_line(exc))}",
                                hint="check the URL and your network, or pass a local "
                                     "path") from None
    return git.Repo(dest)
