"""Drives one bisection: search -> cache -> backend -> store, round after round."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from .backends import Backend, ProbeOutcome, ProbeRequest
from .history import History
from .search import Probe, RepeatPolicy, Result, Status, Verdict, next_step, open_interval
from .store import CacheKey, ProbeRecord, SessionRecord, Store, digest

FINISHED = {s.value for s in Status}


@dataclass
class Range:
    """What is being bisected: a repository and a first-parent candidate list."""

    history: History
    old: str
    new: str
    candidates: list[str]
    repo_id: str
    labels: dict[str, str]     # how the user named the endpoints (release, image, rev)


class Events:
    """Progress hooks; the CLI's displays override what they show."""

    def session(self, record: SessionRecord, resumed: int) -> None: ...
    def round(self, number: int, indices: tuple[int, ...], lo: int, hi: int) -> None: ...
    def phase(self, req: ProbeRequest, phase: str) -> None: ...
    def probe(self, rec: ProbeRecord) -> None: ...
    def close(self) -> None: ...


class Bisection:
    def __init__(self, store: Store, rng: Range, backend: Backend, *, jobs: int = 1,
                 repeat: int = 1, policy: RepeatPolicy = RepeatPolicy.ANY,
                 events: Events | None = None, extra: dict[str, Any] | None = None):
        self.store = store
        self.rng = rng
        self.backend = backend
        self.jobs = jobs
        self.repeat = repeat
        self.policy = policy
        self.events = events or Events()
        self.recipe_hash = digest(backend.recipe())
        self.test_hash = digest([backend.test_recipe(), repeat, policy.value])
        self.env = backend.environment()
        self.identity = {
            "repo": rng.repo_id, "old": rng.old, "new": rng.new, "backend": backend.name,
            "recipe": self.recipe_hash, "test": self.test_hash, "env": self.env,
        }
        self.key = digest(self.identity)[:10]
        self.extra = extra or {}
        self.session: SessionRecord | None = None

    def open_session(self) -> tuple[SessionRecord, bool]:
        """Resume the unfinished session for this exact question, or start a new one."""
        sid, _ = self.predicted_session()
        existing = self.store.session(sid)
        if existing is not None:
            return existing, True
        params = dict(self.extra, key=self.key, identity=self.identity, jobs=self.jobs,
                      repeat=self.repeat, policy=self.policy.value,
                      backend=self.backend.describe(), labels=self.rng.labels,
                      origin=self.rng.history.origin)
        self.store.create_session(sid, params, self.rng.candidates)
        return self.store.session(sid), False

    def cache_key(self, commit: str) -> CacheKey:
        return CacheKey(self.rng.repo_id, commit, self.recipe_hash, self.test_hash, self.env)

    def run(self) -> dict[str, Any]:
        self.session, resumed = self.open_session()
        sid = self.session.id
        done = self.store.probes(sid)
        self.events.session(self.session, len(done) if resumed else -1)
        self.store.remember_commits(self.rng.history.info([self.rng.old, self.rng.new]).values())
        self.store.set_status(sid, "running")
        verdicts = {p.idx: p.verdict for p in done}
        rnd = max((p.round for p in done), default=0)
        n = len(self.rng.candidates)
        try:
            while True:
                step = next_step(n, verdicts, self.jobs)
                if isinstance(step, Result):
                    summary = self.summary(step)
                    self.store.set_status(sid, step.status.value, summary)
                    return summary
                rnd += 1
                self._round(sid, rnd, step, verdicts)
        except BaseException:
            self.backend.cancel()
            self.store.set_status(sid, "interrupted")
            raise
        finally:
            self.events.close()

    def _round(self, sid: str, rnd: int, step: Probe, verdicts: dict[int, Verdict]) -> None:
        lo, hi = open_interval(len(self.rng.candidates), verdicts)
        self.events.round(rnd, step.indices, lo, hi)
        requests = []
        for i in step.indices:
            commit = self.rng.candidates[i]
            hit = self.store.cache_get(self.cache_key(commit))
            if hit is not None:
                hit.round, hit.idx = rnd, i
                now = time.time()
                hit.started = hit.ended = now
                self.store.add_probe(sid, hit)
                self.store.remember_commits(self.rng.history.info([commit]).values())
                verdicts[i] = hit.verdict
                self.events.probe(hit)
                continue
            requests.append(self._request(sid, i, len(requests)))
        if not requests:
            return
        started = time.time()
        for req, outcome in self.backend.run_round(requests, self.events.phase):
            if outcome.transient:
                raise KeyboardInterrupt
            rec = self._record(rnd, req, outcome, started)
            self.store.add_probe(sid, rec)
            self.store.remember_commits(self.rng.history.info([req.commit]).values())
            self.store.cache_put(self.cache_key(req.commit), rec)
            verdicts[req.index] = rec.verdict
            self.events.probe(rec)

    def _request(self, sid: str, index: int, slot: int) -> ProbeRequest:
        commit = self.rng.candidates[index]
        return ProbeRequest(
            session=sid, commit=commit, index=index, slot=slot, runs=self.repeat,
            policy=self.policy, log_dir=self.store.root / "logs" / sid / commit[:12],
            artifacts=self.store.root / "artifacts" / self.recipe_hash[:12] / commit)

    def predicted_session(self) -> tuple[str, dict[int, Verdict]]:
        """The session a run would use now, and its verdicts so far; changes nothing."""
        mine = [s for s in self.store.sessions() if s.params.get("key") == self.key]
        unfinished = [s for s in mine if s.status not in FINISHED]
        if unfinished:
            return unfinished[0].id, self.store.verdicts(unfinished[0].id)
        return f"{self.key}-{len(mine) + 1}", {}

    def peek(self) -> Result | list[ProbeRequest]:
        """The probes the next round would run (cache hits left out), or the result."""
        sid, verdicts = self.predicted_session()
        n = len(self.rng.candidates)
        while True:
            step = next_step(n, verdicts, self.jobs)
            if isinstance(step, Result):
                return step
            hits = {i: self.store.cache_get(self.cache_key(self.rng.candidates[i]))
                    for i in step.indices}
            wanted = [i for i in step.indices if hits[i] is None]
            if wanted:
                return [self._request(sid, i, slot) for slot, i in enumerate(wanted)]
            verdicts.update({i: hit.verdict for i, hit in hits.items()})

    def _record(self, rnd: int, req: ProbeRequest, out: ProbeOutcome, started: float) -> ProbeRecord:
        return ProbeRecord(
            round=rnd, idx=req.index, commit=req.commit, verdict=out.verdict, reason=out.reason,
            exit_code=out.exit_code, build_s=out.build_s, test_s=out.test_s,
            runs=[v.value for v in out.runs], cached=False, started=started, ended=time.time(),
            logs={k: self.store.rel(p) for k, p in out.logs.items()}, details=out.details)

    def summary(self, result: Result) -> dict[str, Any]:
        assert self.session is not None
        return summarize(self.store, self.session.id, self.rng.candidates, result)


def tally(probes: list[ProbeRecord]) -> dict[str, int]:
    """probes: test executions (a commit whose build failed counts once); cached: verdicts
    taken from the cache; rounds: search steps."""
    return {"probes": sum(max(1, len(p.runs)) for p in probes if not p.cached),
            "cached": sum(1 for p in probes if p.cached),
            "rounds": len({p.round for p in probes})}


def summarize(store: Store, sid: str, candidates: list[str], result: Result) -> dict[str, Any]:
    probes = store.probes(sid)
    sha: Callable[[int | None], str | None] = lambda i: None if i is None else candidates[i]
    return {
        "status": result.status.value,
        "first_new": sha(result.first_new),
        "last_old": sha(result.last_old),
        "candidates": [candidates[i] for i in result.candidates],
        "old_outcome": result.old_outcome.value if result.old_outcome else None,
        "new_outcome": result.new_outcome.value if result.new_outcome else None,
        **tally(probes),
        "skipped": [candidates[i] for i in result.skipped],
        "session": sid,
        "explanation": result.explanation,
        "n_candidates": len(candidates),
    }

