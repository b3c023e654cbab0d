"""A backend that answers from a script instead of building: the engine's tests and the
benchmarks that replay its decisions use it."""
from __future__ import annotations

from typing import Callable

from bisect_ngc.core.verdicts import ProbeOutcome


class ScriptedBackend:
    name = "scripted"

    def __init__(self, decide: Callable[[int], ProbeOutcome], stop_after: int | None = None):
        self.decide = decide
        self.stop_after = stop_after
        self.probed: list[int] = []
        self.cancelled = 0
        self.prefetched: list[list[str]] = []
        self.prefetch_done = False

    def describe(self):
        return {"backend": self.name}

    def environment(self):
        return "scripted"

    def prepare(self):
        pass

    def cancel(self):
        self.cancelled += 1

    def containers(self):
        return None

    def prefetch(self, images, *, done=False):
        self.prefetched.append(list(images))
        self.prefetch_done = done

    def dry_run(self, requests):
        return []

    def run_round(self, requests, on_phase):
        for req in requests:
            if self.stop_after is not None and len(self.probed) >= self.stop_after:
                raise KeyboardInterrupt
            self.probed.append(req.index)
            yield req, self.decide(req.index)
