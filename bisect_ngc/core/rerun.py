"""Runs what the answer rests on again, fresh, before the answer is given (verification.py
decides what to run and what the runs mean). Fresh: never from the result cache, never
into it, and never a verdict for the search; each probe is kept in the session, marked
`verify` with its number, so an interrupted check resumes where it stopped. `bis` is the
engine's Bisection, as the `Rerunning` protocol says what of it is used (the engine imports
this module, so it cannot import the engine)."""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Iterator, Protocol

from . import verification
from .probes import Source
from .inputs import stop_if_needed
from .search import Result, Verdict, open_interval

if TYPE_CHECKING:
    from .inputs import Events, Overlays, Range, Settings, Tier
    from .judges import Judge
    from .probes import ProbeRequest
    from .records import ProbeRecord
    from .store import Store
    from .verdicts import ProbeOutcome


class Rerunning(Protocol):
    """What the answer's re-run uses of the engine's Bisection."""

    settings: "Settings"
    judge: "Judge"
    span: "Range"
    store: "Store"
    events: "Events"
    overlays: "Overlays | None"
    tiers: "list[Tier]"

    def request(self, sid: str, index: int, slot: int, source: Source | None = None
                ) -> "ProbeRequest": ...

    def run_requests(self, requests: "list[ProbeRequest]"
                     ) -> "Iterator[tuple[ProbeRequest, ProbeOutcome, float]]": ...

    def record(self, rnd: int, req: "ProbeRequest", out: "ProbeOutcome",
               started: float) -> "ProbeRecord": ...


def verified(bis: Rerunning, sid: str, rnd: int, found: Result) -> tuple[Result, int]:
    """The answer after its fresh runs, and the last round number used."""
    verify = bis.settings.verify if bis.judge.verifies else 0
    n = len(bis.span.candidates)
    pairs = verification.claims(found, lambda i: _tier_of(bis, sid, i))
    while True:
        fresh: dict[tuple[int, str], list[Verdict]] = {}
        for p in bis.store.checks(sid):
            claim = (p.idx, p.details.get("verify_tier") or p.details.get("tier", "build"))
            fresh.setdefault(claim, []).append(p.verdict)
        step = verification.next_round(pairs, fresh, verify)
        if not step:
            cached = {p.idx: p.commit for p in bis.store.probes(sid) if p.cached}
            kept = {p.idx for p in bis.store.checks(sid) if p.details.get("build_reused")}
            return verification.settle(found, pairs, fresh, verify, n, cached, kept), rnd
        rnd += 1
        bis.events.round(rnd, tuple(i for i, _, _ in step),
                         *open_interval(n, bis.store.verdicts(sid)), "verify")
        _probe_again(bis, sid, rnd, [(i, tier, 1 + len(fresh.get((i, tier), [])))
                                     for i, tier, _ in step])


def _probe_again(bis: Rerunning, sid: str, rnd: int, step: list[tuple[int, str, int]]) -> None:
    requests = []
    for slot, (i, tier, attempt) in enumerate(step):
        req = bis.request(sid, i, slot % bis.settings.jobs, _source(bis, sid, i, tier))
        name = f"verify-{tier}-{attempt}"
        requests.append(replace(req, log_dir=req.log_dir / name, run_key=name))
    asked = {r.run_key: (tier, a) for r, (_, tier, a) in zip(requests, step)}
    for req, outcome, started in bis.run_requests(requests):
        stop_if_needed(req, outcome)
        rec = bis.record(rnd, req, outcome, started)
        rec.details["verify_tier"], rec.details["verify"] = asked[req.run_key]
        bis.store.add_probe(sid, rec)
        bis.events.probe(rec)


def _tier_of(bis: Rerunning, sid: str, i: int) -> str:
    last = [p for p in bis.store.probes(sid) if p.idx == i]
    return last[-1].details.get("tier", "build") if last else "build"


def _source(bis: Rerunning, sid: str, i: int, tier: str) -> Source | None:
    """Candidate i as `tier` probes it again (a build: None)."""
    if tier == "overlay" and bis.overlays is not None:
        lo, hi = open_interval(len(bis.span.candidates), bis.store.verdicts(sid))
        source = bis.overlays.source(i, lo, hi)
        return source if source is not None and bis.overlays.make(i, source) else None
    return next((t.sources[i] for t in bis.tiers if t.name == tier and i in t.sources), None)
