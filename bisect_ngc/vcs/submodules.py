"""Submodules from a shared object cache: fetched once, checked out offline.

Every submodule URL gets one bare mirror under CACHE/submodules, shared by every slot,
session and backend on this host. A slot's submodule is a clone of that mirror with
`--shared` (git alternates: no objects of its own), put at the commit the superproject
names and cleaned like the superproject. The network is reached only when a mirror lacks
the commit asked for: one fetch, and if the commit is still missing the probe is a skip
that names it ("submodule third_party/x: commit abc missing upstream").
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import git

from .mirrors import CheckoutError, clone_mirror, last_line, locked, mirror_path, redact_url


class SubmoduleCache:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.fetched: set[str] = set()      # mirrors fetched by this process

    def mirror(self, url: str, sha: str, where: str) -> Path:
        """The mirror of `url`, holding commit `sha`; `where` names the submodule for errors."""
        path = mirror_path(self.root, url)
        if (path / "HEAD").exists() and _has_commit(path, sha):
            return path
        with locked(path):
            if not (path / "HEAD").exists():
                try:
                    clone_mirror(url, path, ["--mirror"])
                except git.GitCommandError as exc:
                    raise CheckoutError(f"submodule {where}: could not clone "
                                        f"{redact_url(url)} ({_last(exc)})") from None
                self.fetched.add(url)
            if _has_commit(path, sha):
                return path
            if url not in self.fetched:          # one fetch per URL and run
                self.fetched.add(url)
                try:
                    git.Repo(path).git.fetch("--prune", "origin")
                except git.GitCommandError as exc:
                    if not _has_commit(path, sha):
                        raise CheckoutError(
                            f"submodule {where}: commit {sha[:12]} is not in the cache and "
                            f"{redact_url(url)} could not be fetched ({_last(exc)})") from None
            if not _has_commit(path, sha):
                raise CheckoutError(f"submodule {where}: commit {sha[:12]} missing upstream")
        return path

    def update(self, tree: git.Repo, sha: str) -> None:
        """Check out the submodules `tree` (at superproject commit `sha`) names, and theirs."""
        if tree.working_tree_dir is None:
            raise CheckoutError(f"{tree.git_dir} is a bare repository: no submodules to check out")
        wt = Path(tree.working_tree_dir)
        urls = _submodule_urls(tree, sha)
        for path, sub_sha in _gitlinks(tree):
            url = urls.get(path)
            if url is None:
                raise CheckoutError(f"submodule {path}: not in .gitmodules at {sha[:12]}")
            if url.startswith(("./", "../")):
                url = _relative_url(tree, url)
            mirror = self.mirror(url, sub_sha, path)
            dest = wt / path
            if not (dest / ".git").exists():
                shutil.rmtree(dest, ignore_errors=True)
                git.Repo.clone_from(str(mirror), dest, multi_options=["--shared",
                                                                      "--no-checkout"])
            sub = git.Repo(dest)
            try:
                sub.git.checkout("--detach", "--force", sub_sha)
                sub.git.clean("-ffdxq")
            except git.GitCommandError as exc:
                raise CheckoutError(f"submodule {path}: checkout failed ({_last(exc)})") from None
            if (dest / ".gitmodules").exists():
                self.update(sub, sub_sha)


def _has_commit(repo: Path, sha: str) -> bool:
    try:
        git.Repo(repo).git.cat_file("-e", f"{sha}^{{commit}}")
        return True
    except (git.GitCommandError, ValueError):
        return False


def _gitlinks(tree: git.Repo) -> list[tuple[str, str]]:
    """(path, commit) of every submodule in the index (mode 160000)."""
    out = tree.git.ls_files("-s", "-z")
    links = []
    for entry in out.split("\0"):
        if entry.startswith("160000 "):
            meta, path = entry.split("\t", 1)
            links.append((path, meta.split()[1]))
    return links


def _submodule_urls(tree: git.Repo, sha: str) -> dict[str, str]:
    """path -> url from the commit's own .gitmodules (never a stale local config)."""
    try:
        out = tree.git.config("--blob", f"{sha}:.gitmodules", "--null", "--list")
    except git.GitCommandError:
        return {}
    names: dict[str, dict[str, str]] = {}
    for item in out.split("\0"):
        key, _, value = item.partition("\n")
        m = re.match(r"^submodule\.(.+)\.(path|url)$", key)
        if m:
            names.setdefault(m.group(1), {})[m.group(2)] = value
    return {v["path"]: v["url"] for v in names.values() if "path" in v and "url" in v}


def _relative_url(tree: git.Repo, rel: str) -> str:
    base = tree.remotes[0].url if tree.remotes else str(Path(tree.common_dir).parent)
    parts = base.rstrip("/").split("/")
    for piece in rel.split("/"):
        if piece == "..":
            parts.pop()
        elif piece not in (".", ""):
            parts.append(piece)
    return "/".join(parts)


def _last(exc: git.GitCommandError) -> str:
    return redact_url(last_line(exc))
