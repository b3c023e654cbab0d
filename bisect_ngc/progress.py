"""Progress while a bisection runs: a rich live panel on a terminal, log lines elsewhere."""
from __future__ import annotations

import statistics
import sys
import threading
import time
from typing import IO

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .backends.base import ProbeRequest
from .engine import Events
from .search import ceil_log
from .store import ProbeRecord, SessionRecord


def say(text: str) -> None:
    """A one-line message to the user, on stderr."""
    print(f"[bisect-ngc] {text}", file=sys.stderr, flush=True)


class _Tracker(Events):
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
        self.n = self.left = len(record.candidates)

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


def _fmt(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s"


class PlainEvents(_Tracker):
    """One line per event on stderr, for logs and pipes."""

    def __init__(self, jobs: int, stream: IO[str] | None = None):
        super().__init__(jobs)
        self.stream = stream or sys.stderr

    def _say(self, text: str) -> None:
        print(f"[bisect-ngc] {text}", file=self.stream, flush=True)

    def session(self, record: SessionRecord, resumed: int) -> None:
        super().session(record, resumed)
        how = f"resuming ({resumed} probes already done)" if resumed >= 0 else "starting"
        self._say(f"session {record.id}: {how}; {self.n} candidates")

    def round(self, number: int, indices: tuple[int, ...], lo: int, hi: int,
              tier: str = "build") -> None:
        super().round(number, indices, lo, hi, tier)
        what = "building and testing" if tier == "build" else f"testing {tier}s of"
        self._say(f"round {number}: {what} {len(indices)} commit(s); {self.left} commits left, "
                  f"~{self.steps_left()} round(s) to go, eta {_fmt(self.eta())}")

    def probe(self, rec: ProbeRecord) -> None:
        super().probe(rec)
        tag = " (cached)" if rec.cached else ""
        why = f": {rec.reason}" if rec.reason else ""
        self._say(f"  {rec.commit[:12]} [{rec.idx}] {rec.verdict.value}{tag}{why}")


class RichEvents(_Tracker):
    """A live panel: commits left, steps left, each running probe's phase, and an ETA."""

    def __init__(self, jobs: int, console: Console | None = None):
        super().__init__(jobs)
        self.console = console or Console(stderr=True)
        self.history: list[str] = []
        self.live = Live(self._render(), console=self.console, refresh_per_second=4,
                         get_renderable=self._render, transient=False)
        self.live.start()

    def _render(self) -> Group:
        head = Text(f"round {self.rnd} ({self.tier}) · {self.left} of {self.n} commits left · "
                    f"~{self.steps_left()} round(s) to go · eta {_fmt(self.eta())}", style="bold")
        table = Table(box=None, show_header=True, header_style="dim")
        table.add_column("commit")
        table.add_column("phase")
        table.add_column("elapsed", justify="right")
        now = time.monotonic()
        with self.lock:
            for commit, (phase, since) in self.running.items():
                table.add_row(commit[:12], phase, _fmt(now - since))
        return Group(*[Text(line) for line in self.history[-8:]], head, table)

    def session(self, record: SessionRecord, resumed: int) -> None:
        super().session(record, resumed)
        how = f"resuming, {resumed} probes done" if resumed >= 0 else "new session"
        self.history.append(f"session {record.id} ({how}), {self.n} candidates")

    def probe(self, rec: ProbeRecord) -> None:
        super().probe(rec)
        tag = " (cached)" if rec.cached else ""
        why = f" — {rec.reason}" if rec.reason else ""
        self.history.append(f"  {rec.commit[:12]} {rec.verdict.value}{tag}{why}")

    def close(self) -> None:
        self.live.stop()


def make_events(jobs: int, quiet: bool) -> Events:
    if quiet:
        return Events()
    if sys.stderr.isatty():
        return RichEvents(jobs)
    return PlainEvents(jobs)
