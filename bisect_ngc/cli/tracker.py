"""What the progress displays share: what is left, what runs, how long probes take."""
from __future__ import annotations

import statistics
import threading
import time

from ..core.probes import ProbeRequest
from ..core.inputs import Events
from ..core.search import ceil_log
from ..core.records import ProbeRecord, SessionRecord


class Tracker(Events):
    """Shared bookkeeping: what is left, what runs, how long probes take."""

    def __init__(self, jobs: int):
        self.jobs = jobs
        self.n = 0
        self.left = 0
        self.rnd = 0
        self.running: dict[str, tuple[str, float]] = {}   # commit -> (phase, since)
        self.durations: list[float] = []
        self.lock = threading.Lock()
        self.candidates: list[str] = []
        self.tier = "build"

    def session(self, record: SessionRecord, resumed: int) -> None:
        self.candidates = record.candidates
        self.n = self.left = len(record.candidates) - 1    # after the old endpoint, as plan says

    def round(self, number: int, indices: tuple[int, ...], lo: int, hi: int,
              tier: str = "build") -> None:
        self.rnd = number
        self.tier = tier
        self.left = max(hi - lo - 1, 0)

    def phase(self, req: ProbeRequest, phase: str) -> None:
        with self.lock:
            since = self.running.get(req.commit, (phase, time.monotonic()))[1]
            self.running[req.commit] = (phase, since)

    def probe(self, rec: ProbeRecord) -> None:
        with self.lock:
            self.running.pop(rec.commit, None)
        if not rec.cached and rec.started and rec.ended:
            self.durations.append(rec.ended - rec.started)

    def steps_left(self) -> int:
        return ceil_log(max(self.left, 1) + 1, self.jobs + 1)

    def eta(self) -> float | None:
        if not self.durations:
            return None
        return statistics.median(self.durations) * self.steps_left()


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s"


def plural(n: int, word: str) -> str:
    """"1 candidate", "2 candidates"."""
    return f"{n} {word}" + ("" if n == 1 else "s")
