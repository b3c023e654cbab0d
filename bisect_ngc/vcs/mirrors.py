"""The clones the tool keeps, and git's words: where a mirror lives and how it is made
(complete or not at all, under a lock that several runs share), URLs without
credentials, and the line of a git error worth showing. Used by history.py and
submodules.py alike."""
from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import git


def redact_url(url: str) -> str:
    """The URL without credentials (`https://user:TOKEN@host/x` -> `https://host/x`)."""
    return re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1", url or "", flags=re.I)


def is_url(spec: str) -> bool:
    return "://" in spec or (re.match(r"^[\w.-]+@[\w.-]+:", spec) is not None)


def mirror_path(root: Path, url: str) -> Path:
    """Where the mirror of `url` lives under `root`: its last path part, and a hash of it."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", redact_url(url).rstrip("/").split("/")[-1])
    return root / f"{name or 'repo'}-{hashlib.sha256(url.encode()).hexdigest()[:10]}"


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Several runs may share a cache dir: one works on `path`, the others wait for it.
    The lock file goes when its holder is done (none is left behind by a failed clone): a
    waiter that then holds a lock on the removed file takes a new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    name = path.with_name(path.name + ".lock")
    while True:
        lock = open(name, "w")
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if os.path.samestat(os.fstat(lock.fileno()), os.stat(name)):
                break
        except FileNotFoundError:
            pass
        lock.close()
    try:
        yield
    finally:
        name.unlink(missing_ok=True)
        lock.close()


def clone_mirror(url: str, dest: Path, options: list[str]) -> None:
    """Clone `url` into `dest`, which appears complete or not at all; the caller holds
    locked(dest). Raises git.GitCommandError."""
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        git.Repo.clone_from(url, partial, multi_options=options)
    except git.GitCommandError:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    partial.rename(dest)


class CheckoutError(Exception):
    """A commit that cannot be checked out as asked: a skip, not an abort."""


def last_line(exc: git.GitCommandError) -> str:
    lines = [ln.strip(" '\"") for ln in (exc.stderr or str(exc)).strip().splitlines()]
    lines = [ln for ln in lines if ln]
    return lines[-1] if lines else "git error"
