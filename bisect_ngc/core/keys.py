"""Stable names for values: the digest of a JSON-able value, and the result cache's key."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any


def digest(obj: Any) -> str:
    """A stable hash of a JSON-able value."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()



@dataclass(frozen=True)
class CacheKey:
    repo: str
    commit: str
    recipe: str
    test: str
    env: str

    @property
    def key(self) -> str:
        return digest([self.repo, self.commit, self.recipe, self.test, self.env])
