"""Runs the answer's pair again, fresh, before the answer is given (verification.py
decides what to run and what the runs mean). Fresh: never from the result cache, never
into it, and never a verdict for the search; each probe is kept in the session, marked
`verify`, so an interrupted check resumes. `bis` is the engine's Bisection (not imported:
the engine imports this)."""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from . import verification
from .backends.base import Source
from .bisection_inputs import Interrupted
from .search import Result, Verdict, open_interval


def verified(bis: Any, sid: str, rnd: int, found: Result) -> tuple[Result, int]:
    """The answer after its fresh runs, and the last round number used."""
    verify = bis.settings.verify if bis.verifies else 0
    n = len(bis.span.candidates)
    while True:
        fresh: dict[int, list[Verdict]] = {}
        for p in bis.store.checks(sid):
            fresh.setdefault(p.idx, []).append(p.verdict)
        step = verification.next_round(found, fresh, verify)
        if not step:
            return verification.settle(found, fresh, verify, n), rnd
        rnd += 1
        bis.events.round(rnd, step, *open_interval(n, bis.store.verdicts(sid)), "verify")
        _probe_again(bis, sid, rnd, step, 1 + len(fresh.get(step[0], [])))


def _probe_again(bis: Any, sid: str, rnd: int, indices: tuple[int, ...],
                 attempt: int) -> None:
    requests = []
    for slot, i in enumerate(indices):
        req = bis.request(sid, i, slot, _source(bis, sid, i))
        requests.append(replace(req, log_dir=req.log_dir / f"verify-{attempt}",
                                run_key=f"verify-{attempt}"))
    started = time.time()
    for req, outcome in bis.backend.run_round(requests, bis.events.phase):
        if outcome.transient:
            raise Interrupted(f"the probe of {req.commit[:12]} was interrupted")
        rec = bis._record(rnd, req, outcome, started)
        rec.details["verify"] = attempt
        bis.store.add_probe(sid, rec)
        bis.events.probe(rec)


def _source(bis: Any, sid: str, i: int) -> Source | None:
    """How the search last probed candidate i: the same tier again (a build: None)."""
    last = [p for p in bis.store.probes(sid) if p.idx == i]
    tier = last[-1].details.get("tier", "build") if last else "build"
    if tier == "overlay" and bis.overlays is not None:
        lo, hi = open_interval(len(bis.span.candidates), bis.store.verdicts(sid))
        source = bis.overlays.source(i, lo, hi)
        return source if source is not None and bis.overlays.make(i, source) else None
    return next((t.sources[i] for t in bis.tiers if t.name == tier and i in t.sources), None)
