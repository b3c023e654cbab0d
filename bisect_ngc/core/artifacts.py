"""Content-addressed build outputs, shared across sessions and backends.

A build's key is (commit, base image, the recipe's build key), computed the same way by
every backend, so a wheel built by one is found by another that shares the directory.
A build writes into a staging directory of its own (several runs may share the store);
publishing renames it into place with a meta.json, so an entry that exists is complete,
and a second build of the same key loses the rename quietly and uses the first.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .keys import digest


def artifact_name(url: str) -> str:
    """The file name a URL downloads to."""
    return url.rstrip("/").rsplit("/", 1)[-1].split("#")[0] or "artifact"


@dataclass(frozen=True)
class Artifact:
    key: str
    path: Path
    meta: dict[str, Any]

    @property
    def size(self) -> int:
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())


class ArtifactStore:
    def __init__(self, root: Path):
        self.root = Path(root)

    @staticmethod
    def key(commit: str, image: str, build_key: str) -> str:
        return digest([commit, image, build_key])[:24]

    def path(self, key: str) -> Path:
        return self.root / key

    def get(self, key: str) -> Artifact | None:
        meta = self.path(key) / "meta.json"
        if not meta.exists():
            return None
        return Artifact(key, self.path(key), json.loads(meta.read_text()))

    @contextmanager
    def staging(self, key: str) -> Iterator[Path]:
        """An empty directory of this build's own, removed afterwards unless published."""
        (self.root / ".staging").mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{key}-{os.getpid()}-", dir=self.root / ".staging"))
        try:
            yield tmp
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def publish(self, key: str, staging: Path, meta: dict[str, Any]) -> Artifact:
        """Move a finished build into place; if another process published the same key
        first, keep theirs."""
        (staging / "meta.json").write_text(json.dumps(dict(meta, created=time.time()),
                                                      indent=1))
        final = self.path(key)
        try:
            os.rename(staging, final)
        except OSError:
            if self.get(key) is None:   # not someone else's finished entry: a real error
                raise
        found = self.get(key)
        assert found is not None
        return found

    def fetch(self, url: str, say=lambda text: None) -> Artifact:
        """A prebuilt artifact (a nightly wheel, say), downloaded once: keyed by its URL,
        so mapping it to a commit and probing it share one download."""
        key = self.key("", "prebuilt", url)
        found = self.get(key)
        if found is not None:
            return found
        say(f"downloading {url}")
        with self.staging(key) as staging:
            with urlopen(url, timeout=120) as resp, \
                    open(staging / artifact_name(url), "wb") as out:
                shutil.copyfileobj(resp, out)
            return self.publish(key, staging, {"url": url})

    def as_is(self) -> Artifact:
        """The artifact of a probe that needs none (an image as it is): empty, complete."""
        path = self.root / ".as-is"      # hidden: not a build, never listed or pruned
        path.mkdir(parents=True, exist_ok=True)
        (path / "meta.json").write_text('{"as_is": true}\n')
        return Artifact("as-is", path, {"as_is": True})

    def entries(self) -> list[Artifact]:
        if not self.root.exists():
            return []
        found = [self.get(p.name) for p in self.root.iterdir() if p.is_dir()
                 and not p.name.startswith(".")]
        return sorted((a for a in found if a), key=lambda a: a.meta.get("created", 0))

    def prune(self, older_than_s: float | None = None) -> tuple[int, int]:
        """Remove entries (all, or those older than the given age) and leftover staging;
        returns (entries removed, bytes freed)."""
        now = time.time()
        gone = [a for a in self.entries()
                if older_than_s is None or now - a.meta.get("created", 0) > older_than_s]
        freed = sum(a.size for a in gone)
        for art in gone:
            shutil.rmtree(art.path, ignore_errors=True)
        shutil.rmtree(self.root / ".staging", ignore_errors=True)
        return len(gone), freed


def urlopen(url: str, timeout: float):
    import urllib.request    # pulls in ssl: only where something is fetched
    return urllib.request.urlopen(url, timeout=timeout)
