"""Drives one bisection: search -> cache -> backend -> store, round after round.

Cheaper tiers go first: each narrows the range as far as its prebuilt artifacts allow
(NGC images as they are, then nightly wheels), and builds search only what is left. In
that last stretch a commit whose diff to a built neighbour is Python-only is probed as an
overlay of the neighbour's wheel (wheel_overlay.Overlays) instead of being built."""
from __future__ import annotations

import shlex
import time
from itertools import product
from typing import Callable, Iterator

from .probes import Backend, ProbeRequest, Source, in_batches
from .verdicts import ProbeOutcome
from .environments import Environment, paired
from .recipes import Recipe
from .judges import Judge, PassFail
from .inputs import Events, ImageRule, Overlays, Range, Settings, Tier, stop_if_needed
from .search import (Result, Round, Status, Verdict, next_in_subset,
                     next_step, open_interval, skip_limit)
from .keys import CacheKey, digest
from .rerun import verified
from .records import (ProbeRecord, SessionParams, SessionRecord, SessionResult, SessionStatus,
                      finished)
from .store import Store



class Bisection:
    def __init__(self, store: Store, span: Range, recipe: Recipe, backend: Backend,
                 settings: Settings | None = None, *, events: Events | None = None,
                 ships: Callable[[str], list[dict[str, str]]] | None = None,
                 tiers: list[Tier] | None = None, overlays: Overlays | None = None,
                 images: ImageRule | None = None, judge: Judge | None = None):
        self.store = store
        self.span = span
        self.settings = settings or Settings()
        self.events = events or Events()
        self.ships = ships or (lambda sha: [])
        self.tiers = [t for t in tiers or [] if t.sources]
        self.overlays = overlays
        self.images = images      # release mode: images among builds (prebuilt/image_evidence)
        self.judge: Judge = judge or PassFail()     # metric mode: metric/measured.MetricJudge
        self._adopt(recipe, backend)
        self.identity = {
            "repo": span.repo_id, "old": span.old, "new": span.new, "backend": backend.name,
            "recipe": self.build_key, "test": self.test_key, "env": self.env,
        }
        self.key = digest(self.identity)[:10]
        self.session: SessionRecord | None = None

    def open_session(self) -> tuple[SessionRecord, bool]:
        """Resume the unfinished session for this exact question (or a finished one the
        judge may take further: --metric's with a higher --max-runs), or start a new one."""
        sid, _ = self.predicted_session()
        existing = self.store.session(sid)
        if existing is not None:
            return existing, True
        s = self.settings
        params = SessionParams(
            key=self.key, identity=self.identity, jobs=s.jobs, repeat=s.repeat,
            policy=s.policy.value, backend=self.backend.describe(), recipe=self.recipe.show(),
            labels=self.span.labels, origin=self.span.history.web_origin(),
            subject=self.recipe.subject, probe_argv=s.probe_argv)
        self.store.create_session(sid, params, self.span.candidates)
        created = self.store.session(sid)
        assert created is not None, sid   # just inserted
        return created, False

    def cache_key(self, commit: str, source: Source | None = None) -> CacheKey:
        if source is None:
            return CacheKey(self.span.repo_id, commit, self.build_key, self.test_key, self.env)
        return CacheKey(self.span.repo_id, commit, digest([source.tier, source.ref]),
                        digest([self.test_key, source.tier]), self.env)

    def plan(self, verdicts: dict[int, Verdict]) -> tuple[Tier | None, Round | Result]:
        """The cheapest tier that can still narrow the range, and its round; else builds."""
        asked = self.judge.plan(verdicts)
        if asked is not None:
            return None, asked
        n = len(self.span.candidates)
        tier, step = self._plan(n, verdicts)
        if tier is None and self.images is not None:
            checked = self.images.before_builds(verdicts, self.recipe)
            if checked is not None:
                return None, checked
        stop = skip_limit(n, verdicts, self.settings.max_skips)
        return (None, stop) if isinstance(step, Round) and stop is not None else (tier, step)

    def _plan(self, n: int, verdicts: dict[int, Verdict]) -> tuple[Tier | None, Round | Result]:
        for tier in self.tiers:
            step = next_in_subset(n, verdicts, tier.sources, self.settings.jobs)
            if step is not None:
                return tier, step
        cheap = {}
        if self.overlays is not None and 0 in verdicts and n - 1 in verdicts:
            cheap = self.overlays.cheap(*open_interval(n, verdicts), verdicts)
        return None, next_step(n, verdicts, self.settings.jobs, cheap=cheap)

    def _adopt(self, recipe: Recipe, backend: Backend) -> None:
        """Probe with this recipe and backend from now on, under their cache keys."""
        self.recipe, self.backend = recipe, backend
        self.build_key = recipe.build_key()
        self.test_key = self.judge.test_key(digest([recipe.test_key(), self.settings.repeat,
                                                     self.settings.policy.value]))
        self.env = backend.environment()

    def _follow_narrowing(self, verdicts: dict[int, Verdict]) -> None:
        """Builds move into the release the images narrowed to, where the rule says so."""
        moved = self.images.follow(verdicts, self.recipe.image) if self.images else None
        if moved is not None:
            recipe, backend, self.overlays = moved
            backend.prepare()
            self._adopt(recipe, backend)

    @property
    def sid(self) -> str:
        assert self.session is not None, "run() opens the session first"
        return self.session.id

    def _paired(self, found: Result) -> Result:
        """The last guard against a confident wrong answer (environments.paired)."""
        envs = {p.idx: Environment.from_dict(p.details.get("environment"))
                for p in self.store.probes(self.sid)}
        return paired(found, {i: e for i, e in envs.items() if e is not None})

    def _note(self, rec: ProbeRecord, verdicts: dict[int, Verdict]) -> None:
        """A verdict for the search (the image rule may keep an image's instead)."""
        if self.judge.note(rec, verdicts):
            return
        if self.images is not None:
            self.images.note(rec, verdicts)
        else:
            verdicts[rec.idx] = rec.verdict

    def _lookup(self, tier: Tier | None, i: int, lo: int, hi: int
                ) -> tuple[Source | None, ProbeRecord | None]:
        """How to probe candidate i, and its cached verdict if there is one: a prebuilt
        tier's artifact; in the build tier its build, or an overlay where one is safe."""
        commit = self.span.candidates[i]
        source = tier.sources[i] if tier else None
        hit = self._cached(commit, source)
        if hit is None and tier is None and self.overlays is not None:
            overlay = self.overlays.source(i, lo, hi)
            if overlay is not None:
                source, hit = overlay, self._cached(commit, overlay)
        return source, hit if self.judge.reuses and self.judge.reuses_probe(i) else None

    def run(self) -> SessionResult:
        self.session, resumed = self.open_session()
        sid = self.session.id
        done = self.store.probes(sid)
        self.events.session(self.session, len(done) if resumed else -1)
        self._remember([self.span.old, self.span.new])
        if finished(self.session.status):           # a judge continues it
            self.store.reopen(sid)
        else:
            self.store.set_status(sid, SessionStatus.RUNNING)
        verdicts: dict[int, Verdict] = {}
        for p in done:
            self._note(p, verdicts)
        rnd = max((p.round for p in done), default=0)
        try:
            while True:
                self._follow_narrowing(verdicts)
                tier, step = self.plan(verdicts)
                if isinstance(step, Result):
                    self.backend.prefetch([], done=True)    # nothing more to get
                    step, rnd = verified(self, sid, rnd, self._paired(step))
                    result = self.result(step)
                    self.store.set_status(sid, SessionStatus(step.status.value), result)
                    return result
                rnd += 1
                self._round(sid, rnd, step, verdicts, tier)
        except BaseException:
            self.backend.cancel()
            self.store.set_status(sid, SessionStatus.INTERRUPTED)
            raise
        finally:
            self.events.close()

    def _remember(self, shas: list[str]) -> None:
        """Commit titles go to the store as probes happen: reports never open the repo."""
        self.store.remember_commits(self.span.history.info(shas).values())

    def _cached(self, commit: str, source: Source | None = None) -> ProbeRecord | None:
        return self.store.cache_get(self.cache_key(commit, source),
                                    skips=not self.settings.retry_skips)

    def _round(self, sid: str, rnd: int, step: Round, verdicts: dict[int, Verdict],
               tier: Tier | None = None) -> None:
        self._prefetch(step, verdicts, tier)
        for batch in self.judge.batches(step, verdicts):
            self._batch(sid, rnd, batch, verdicts, tier)

    def _prefetch(self, step: Round, verdicts: dict[int, Verdict], tier: Tier | None) -> None:
        """While a round of images runs, the backend gets the images the next round may
        need, whichever way this one goes (none whose verdict is cached); any other round
        drops what it had not started."""
        refs: list[str] = []
        if tier is not None and tier.name == "image" and len(step.indices) <= 3:
            n, running, c = len(self.span.candidates), set(step.indices), self.span.candidates
            known = {i: hit.verdict for i in step.indices
                     if (hit := self._cached(c[i], tier.sources.get(i))) is not None}
            for outcome in product((Verdict.PASS, Verdict.FAIL), repeat=len(step.indices)):
                if any(known.get(i, v) is not v for i, v in zip(step.indices, outcome)):
                    continue                     # a cached verdict says how it goes
                after = {**verdicts, **dict(zip(step.indices, outcome))}
                nxt = next_in_subset(n, after, tier.sources, self.settings.jobs)
                refs += [tier.sources[i].ref for i in (nxt.indices if nxt else ())
                         if i not in running and self._cached(c[i], tier.sources[i]) is None]
        self.backend.prefetch(list(dict.fromkeys(refs)))

    def _batch(self, sid: str, rnd: int, indices: tuple[int, ...], verdicts: dict[int, Verdict],
               tier: Tier | None) -> None:
        lo, hi = open_interval(len(self.span.candidates), verdicts)
        self.events.round(rnd, indices, lo, hi, tier.name if tier else "build")
        requests: list[ProbeRequest] = []
        for i in indices:
            commit = self.span.candidates[i]
            source, hit = self._lookup(tier, i, lo, hi)
            if hit is None and source is not None and source.tier == "overlay" and \
                    self.overlays is not None and not self.overlays.make(i, source):
                source = None    # refused: build it after all (no build verdict cached)
            if hit is not None:
                hit.round, hit.idx = rnd, i
                hit.started = hit.ended = time.time()
                self.store.add_probe(sid, hit)
                self._remember([commit])
                self._note(hit, verdicts)
                self.events.probe(hit)
                continue
            requests.append(self.request(sid, i, len(requests) % self.settings.jobs, source))
        if not requests:
            return
        for req, outcome, started in self.run_requests(requests):
            stop_if_needed(req, outcome)
            rec = self.record(rnd, req, outcome, started)
            self.store.add_probe(sid, rec)
            self._remember([req.commit])
            if outcome.cacheable:
                self.store.cache_put(self.cache_key(req.commit, req.source),
                                     self.judge.cached_form(rec))
            self._note(rec, verdicts)
            self.events.probe(rec)

    def run_requests(self, requests: list[ProbeRequest]
                     ) -> Iterator[tuple[ProbeRequest, ProbeOutcome, float]]:
        return in_batches(self.backend, requests, self.settings.jobs, self.events.phase)

    def request(self, sid: str, index: int, slot: int,
                source: Source | None = None) -> ProbeRequest:
        commit = self.span.candidates[index]
        logs = self.store.root / "logs" / sid / commit[:12]
        return self.judge.request(ProbeRequest(
            session=sid, commit=commit, index=index, slot=slot, runs=self.settings.repeat,
            policy=self.settings.policy, log_dir=logs / source.tier if source else logs,
            artifacts_dir=self.store.root / "artifacts" / self.build_key[:12] / commit,
            expect_commit=self.recipe.expect_torch_commit, source=source))

    def predicted_session(self) -> tuple[str, dict[int, Verdict]]:
        """The session a run would use now, and its verdicts so far; changes nothing."""
        mine = [s for s in self.store.sessions() if s.params.key == self.key]
        unfinished = [s for s in mine if not finished(s.status)]
        if unfinished:
            return unfinished[0].id, self.store.verdicts(unfinished[0].id)
        last = mine[0] if mine else None            # newest first
        if last is not None and last.result is not None and self.judge.continues(last.result):
            return last.id, self.store.verdicts(last.id)
        return f"{self.key}-{len(mine) + 1}", {}

    def peek(self) -> Result | list[ProbeRequest]:
        """The probes the next round would run (cache hits left out), or the result."""
        sid, verdicts = self.predicted_session()
        while True:
            tier, step = self.plan(verdicts)
            if isinstance(step, Result):
                return step
            lo, hi = open_interval(len(self.span.candidates), verdicts)
            found = {i: self._lookup(tier, i, lo, hi) for i in step.indices}
            src = {i: source for i, (source, _) in found.items()}
            hits = {i: hit for i, (_, hit) in found.items()}
            wanted = [i for i in step.indices if hits[i] is None]
            if wanted:
                return [self.request(sid, i, slot, src[i]) for slot, i in enumerate(wanted)]
            for i, hit in hits.items():
                if hit is not None:           # as a run notes it: a judge learns from hits
                    hit.idx = i
                    self._note(hit, verdicts)

    def record(self, rnd: int, req: ProbeRequest, out: ProbeOutcome,
                started: float) -> ProbeRecord:
        details = dict(out.details, tier=req.tier.value,
                       environment=req.environment(
                           self.recipe.image, [c.label for c in self.recipe.companions]).as_dict())
        if req.source:
            details["source"] = req.source.label
            if req.source.why:
                details["source_why"] = req.source.why
            if req.source.tier == "overlay":
                details["overlay_of"] = req.source.reports
        if out.checkout_s is not None:
            details["checkout_s"] = round(out.checkout_s, 3)
        return self.judge.record(ProbeRecord(
            round=rnd, idx=req.index, commit=req.commit, verdict=out.verdict, reason=out.reason,
            exit_code=out.exit_code, build_s=out.build_s, test_s=out.test_s,
            runs=[v.value for v in out.runs], cached=False, started=started, ended=time.time(),
            logs={k: self.store.rel(p) for k, p in out.logs.items()}, details=details),
            out, self.backend.name)

    def _skip_summary(self, found: Result) -> str:
        """Where the untestable commits lie and why they were skipped, most often."""
        cands = self.span.candidates
        skipped = {p.commit: p.reason for p in self.store.probes(self.sid)
                   if p.verdict is Verdict.SKIP}
        reason, count = _most_common(list(skipped.values()))
        first, last = found.skipped[0], found.skipped[-1]
        probe = shlex.join((self.settings.probe_argv or ["bisect-ngc", "probe"]) +
                           ["--commit", cands[first]])
        return (f"; untestable: {len(found.skipped)} of the commits {cands[first][:12]} "
                f"(#{first}) .. {cands[last][:12]} (#{last}), most often because "
                f"\"{reason}\" ({count} of {len(skipped)}); check the test at one of them with "
                f"`{probe}`, or raise --max-skips")

    def result(self, found: Result) -> SessionResult:
        found = self.judge.answer(found)
        cands = self.span.candidates
        sha: Callable[[int | None], str | None] = lambda i: None if i is None else cands[i]
        reasons, explanation, components = {}, found.explanation, None
        if found.status.value == "invalid-endpoints":
            by_idx = {p.idx: p for p in self.store.probes(self.sid)}
            seen = []
            for side, i in (("old", 0), ("new", len(cands) - 1)):
                p = by_idx.get(i)
                if p and (p.verdict is Verdict.SKIP or p.exit_code == 127):
                    reasons[side] = p.reason
                if p and p.details.get("source"):
                    seen.append(f"{p.details['source']}: {p.verdict.value}")
            if seen:
                explanation += f" ({'; '.join(seen)}; nothing was built)"
        if found.stopped_early:
            explanation += self._skip_summary(found)
        if found.status is Status.NOT_IN_COMMITS and self.images is not None:
            components = self.images.components()
        first = sha(found.first_new)
        res = SessionResult(
            status=found.status.value, first_new=first, last_old=sha(found.last_old),
            candidates=[cands[i] for i in found.candidates],
            old_outcome=found.old_outcome.value if found.old_outcome else None,
            new_outcome=found.new_outcome.value if found.new_outcome else None,
            skipped=[cands[i] for i in found.skipped], explanation=explanation,
            n_candidates=len(cands) - 1, endpoint_reasons=reasons,
            ships=self.ships(first) if first else [], components=components)
        return self.judge.finish(found, res)


def _most_common(reasons: list[str]) -> tuple[str, int]:
    counts: dict[str, int] = {}
    for r in reasons:
        counts[r] = counts.get(r, 0) + 1
    return max(counts.items(), key=lambda kv: kv[1]) if counts else ("", 0)
