"""The rich live panel shown while a bisection runs on a terminal."""
from __future__ import annotations

import time

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .tracker import Tracker, fmt_seconds, plural
from ..core.records import ProbeRecord, SessionRecord


class RichEvents(Tracker):
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
                    f"~{self.steps_left()} round(s) to go · eta {fmt_seconds(self.eta())}", style="bold")
        table = Table(box=None, show_header=True, header_style="dim")
        table.add_column("commit")
        table.add_column("phase")
        table.add_column("elapsed", justify="right")
        now = time.monotonic()
        with self.lock:
            for commit, (phase, since) in self.running.items():
                table.add_row(commit[:12], phase, fmt_seconds(now - since))
        return Group(*[Text(line) for line in self.history[-8:]], head, table)

    def session(self, record: SessionRecord, resumed: int) -> None:
        super().session(record, resumed)
        how = f"resuming, {resumed} probes done" if resumed >= 0 else "new session"
        self.history.append(f"session {record.id} ({how}), {plural(self.n, 'candidate')}")

    def probe(self, rec: ProbeRecord) -> None:
        super().probe(rec)
        tag = " (cached)" if rec.cached else ""
        why = f" — {rec.reason}" if rec.reason else ""
        self.history.append(f"  {rec.commit[:12]} {rec.verdict.value}{tag}{why}")

    def close(self) -> None:
        self.live.stop()
