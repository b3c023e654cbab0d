"""Content-addressed build outputs, shared across sessions and backends.

A build's key is (commit, base image digest, recipe hash, build settings). Its outputs
are written to a staging directory and renamed into place with a meta.json only when the
build succeeded, so an entry that exists is complete.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .store import digest


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
    def key(commit: str, image_digest: str, recipe_hash: str, settings: dict[str, Any]) -> str:
        return digest([commit, image_digest, recipe_hash, settings])[:24]

    def path(self, key: str) -> Path:
        return self.root / key

    def get(self, key: str) -> Artifact | None:
        meta = self.path(key) / "meta.json"
        if not meta.exists():
            return None
        return Artifact(key, self.path(key), json.loads(meta.read_text()))

    def staging(self, key: str) -> Path:
        """An empty directory for a build to write into."""
        tmp = self.root / ".staging" / key
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        return tmp

    def commit(self, key: str, staging: Path, meta: dict[str, Any]) -> Artifact:
        (staging / "meta.json").write_text(json.dumps(dict(meta, created=time.time()),
                                                      indent=1))
        final = self.path(key)
        shutil.rmtree(final, ignore_errors=True)
        staging.rename(final)
        return Artifact(key, final, json.loads((final / "meta.json").read_text()))

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
