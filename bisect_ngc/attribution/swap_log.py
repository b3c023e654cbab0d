"""Swap probes' outcomes in SQLite, one row per swap as it comes: shared by every session
and backend that asks about the same two images with the same test and runs per swap, so
a killed run resumes and a second question reuses them. Rows written under another key
(an earlier version's single runs, its JSON files) are never read: misses, not hits."""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS swaps (
    attribution TEXT NOT NULL,     -- the two image digests and the test
    key TEXT NOT NULL,             -- plain:a | plain:b | a swap's ["into", [units]]
    outcome TEXT NOT NULL,         -- pass/fail/skip (plain) or a, b, skip (a swap)
    why TEXT NOT NULL DEFAULT '',  -- a skip's reason
    at REAL NOT NULL,
    PRIMARY KEY (attribution, key)
)"""


class SwapLog:
    def __init__(self, path: Path, attribution: str):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(_SCHEMA)
        self.attribution = attribution

    def outcomes(self) -> dict[str, tuple[str, str]]:
        rows = self.db.execute("SELECT key, outcome, why FROM swaps WHERE attribution = ? "
                               "ORDER BY at, rowid", (self.attribution,))
        return {key: (outcome, why) for key, outcome, why in rows}

    def put(self, key: str, outcome: str, why: str = "") -> None:
        self.db.execute("INSERT OR REPLACE INTO swaps VALUES (?, ?, ?, ?, ?)",
                        (self.attribution, key, outcome, why, time.time()))
