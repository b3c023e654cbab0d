"""Progress while a bisection runs: log lines, or on a terminal the live panel of live.py."""
from __future__ import annotations

import sys
from typing import IO

from ..core.inputs import Events
from ..core.records import ProbeRecord, SessionRecord
from .tracker import Tracker, fmt_seconds, plural


def say(text: str) -> None:
    """A one-line message to the user, on stderr."""
    print(f"[bisect-ngc] {text}", file=sys.stderr, flush=True)


class PlainEvents(Tracker):
    """One line per event on stderr, for logs and pipes."""

    def __init__(self, jobs: int, stream: IO[str] | None = None):
        super().__init__(jobs)
        self.stream = stream or sys.stderr

    def _say(self, text: str) -> None:
        print(f"[bisect-ngc] {text}", file=self.stream, flush=True)

    def session(self, record: SessionRecord, resumed: int) -> None:
        super().session(record, resumed)
        how = f"resuming ({resumed} probes already done)" if resumed >= 0 else "starting"
        self._say(f"session {record.id}: {how}; {plural(self.n, 'candidate')}")

    def round(self, number: int, indices: tuple[int, ...], lo: int, hi: int,
              tier: str = "build") -> None:
        super().round(number, indices, lo, hi, tier)
        what = {"build": "building and testing",
                "verify": "re-running, fresh, the answer's pair:"}.get(tier, f"testing {tier}s of")
        if self.left == 0:      # the belief runs commits again until it is sure enough
            self._say(f"round {number}: {what} {len(indices)} commit(s) again, to be sure of "
                      "the answer")
            return
        self._say(f"round {number}: {what} {len(indices)} commit(s); {self.left} commits left, "
                  f"~{self.steps_left()} round(s) to go, eta {fmt_seconds(self.eta())}")

    def probe(self, rec: ProbeRecord) -> None:
        super().probe(rec)
        tag = " (cached)" if rec.cached else ""
        why = f": {rec.reason}" if rec.reason else ""
        self._say(f"  {rec.commit[:12]} [{rec.idx}] {rec.verdict.value}{tag}{why}")


def make_events(jobs: int, quiet: bool) -> Events:
    if quiet:
        return Events()
    if sys.stderr.isatty():
        from .live import RichEvents     # rich only where there is a terminal to draw on
        return RichEvents(jobs)
    return PlainEvents(jobs)
