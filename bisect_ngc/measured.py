"""Bisection on a metric (`--metric NAME`): each probe is a sample of numbers.

The test prints NAME in its last JSON line; a run that exits non-zero, or prints no such
number, measured nothing (a skip of that run). A round gives each commit asked for a block
of runs, interleaved (A B A B, never A A B B), one run per probe record. The comparator
(comparator.judge) turns the samples into the search's verdicts, asks for more runs where
it cannot tell yet, and the answer's pair must differ by itself (comparator.confirm).
Only builds are compared: an NGC image or a nightly is built another way, and its speed says
nothing about a commit.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any

from repro.measure import gpu_clocks

from .backends.base import ProbeOutcome, ProbeRequest, Source
from .comparator import Rule, companions, confirm, endpoints, judge, numbers, together
from .bisection_inputs import Tier
from .engine import Bisection
from .search import Result, Round, Status, Verdict, next_step, skip_limit
from .keys import digest
from .records import ProbeRecord, SessionResult


@dataclass(frozen=True)
class Metric:
    name: str
    rule: Rule

    @property
    def direction(self) -> str:
        return "lower" if self.rule.lower_is_better else "higher"


def metric_value(details: dict[str, Any], name: str) -> float | None:
    """NAME (a dotted path into nested objects) from a run's JSON line, if it is a number."""
    value: Any = details
    for part in [name] if name in details else name.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        return None
    return float(value)


def measurement(out: ProbeOutcome, name: str) -> tuple[float | None, str]:
    """One run's number, or why it has none."""
    if out.verdict is Verdict.SKIP:
        return None, out.reason
    if out.verdict is Verdict.FAIL:
        return None, f"the test failed (exit {out.exit_code}): nothing measured"
    value = metric_value(out.details, name)
    if value is None:
        keys = ", ".join(sorted(out.details)[:12]) or "no JSON line"
        return None, f"the test printed no number {name!r} (its last JSON line has: {keys})"
    return value, f"{name} = {value:g}"


def spread(sample: list[float]) -> dict[str, float]:
    q = statistics.quantiles(sample, n=4) if len(sample) >= 2 else [sample[0]] * 3
    return {"n": len(sample), "median": statistics.median(sample), "q1": q[0], "q3": q[2],
            "min": min(sample), "max": max(sample)}


FOREIGN = 10**6      # rounds of the k-th other session are numbered -k * FOREIGN + round


class MeasuredBisection(Bisection):
    verifies = False      # its answer is confirmed by fresh samples (comparator.confirm) instead
    def __init__(self, *args: Any, metric: Metric, **kwargs: Any):
        self.metric = metric
        self.samples: dict[int, list[tuple[int, float]]] = {}   # (round, number)
        self.attempts: dict[int, int] = {}
        self._sessions: dict[str, int] = {}     # another session's id -> its block of rounds
        super().__init__(*args, **kwargs)

    def _adopt(self, recipe, backend) -> None:
        super()._adopt(recipe, backend)
        self.test_key = digest([self.test_key, "metric", self.metric.name])

    def plan(self, verdicts: dict[int, Verdict]) -> tuple[Tier | None, Round | Result]:
        n, rule = len(self.span.candidates), self.metric.rule
        j = judge(n, self.samples, self.attempts, rule)
        verdicts.clear()
        verdicts.update(j.verdicts)
        if j.more:
            return None, Round(j.more)
        if j.difference is not None and j.difference.call == "same":
            return None, Result(Status.INVALID_ENDPOINTS, explanation=(
                f"the endpoints do not differ in {self.metric.name}: "
                f"{j.difference.describe(rule)}; there is no change to bisect"))
        step = next_step(n, verdicts)
        stop = skip_limit(n, verdicts, self.settings.max_skips)
        if isinstance(step, Round):
            return None, stop or step
        checked = confirm(step, self.samples, self.attempts, rule)
        return None, Round(checked) if isinstance(checked, tuple) else checked

    def _lookup(self, tier: Tier | None, i: int, lo: int, hi: int
                ) -> tuple[Source | None, ProbeRecord | None]:
        source, hit = super()._lookup(tier, i, lo, hi)
        return (source, None) if i in self.attempts else (source, hit)

    def _round(self, sid: str, rnd: int, step: Round, verdicts: dict[int, Verdict],
               tier: Tier | None = None) -> None:
        """`block` passes over the commits and the open interval's ends, one run each per
        pass: interleaved, so each commit is compared with numbers of the same time."""
        cands = self.span.candidates
        hits = tuple(i for i in step.indices
                     if i not in self.attempts and self._cached(cands[i]) is not None)
        if hits:        # whole samples from the cache, with the references of their rounds
            super()._round(sid, rnd, Round(hits), verdicts, tier)
        asked = tuple(i for i in step.indices if i not in hits)
        if not asked:
            return
        measured = companions(asked, verdicts, len(cands))
        target = {i: self.attempts.get(i, 0) + self.metric.rule.block for i in measured}
        for _ in range(self.metric.rule.block):
            # a commit whose runs never gave a number is not run again and again
            todo = tuple(i for i in measured if self.attempts.get(i, 0) < target[i] and
                         (self.samples.get(i) or self.attempts.get(i, 0) == 0))
            if not todo:
                return
            for i in todo:      # one at a time: a backend runs a round's probes at once
                super()._round(sid, rnd, Round((i,)), verdicts, tier)

    def request(self, sid: str, index: int, slot: int,
                source: Source | None = None) -> ProbeRequest:
        """Each run of a commit is a probe of its own (numbered by the runs before it, so a
        resumed session asks for the one in flight again, and Slurm re-attaches to it)."""
        return replace(super().request(sid, index, slot, source),
                       run_key=str(self.attempts.get(index, 0)))

    def _record(self, rnd: int, req: ProbeRequest, out: ProbeOutcome,
                started: float) -> ProbeRecord:
        rec = super()._record(rnd, req, out, started)
        value, why = measurement(out, self.metric.name)
        rec.verdict, rec.reason = (Verdict.SKIP if value is None else Verdict.PASS), why
        rec.details.update(metric=self.metric.name, samples=[] if value is None else [value])
        if self.backend.name in ("local", "docker"):    # the GPU is this host's
            rec.details["gpu_clocks"] = gpu_clocks()
        return rec

    def _note(self, rec: ProbeRecord, verdicts: dict[int, Verdict]) -> None:
        i = rec.idx
        if rec.cached:        # another session's rounds, kept apart from ours
            tagged = [(self._foreign(sid, r), v) for sid, r, v in rec.details.get("tagged", [])]
        else:
            tagged = [(rec.round, float(v)) for v in rec.details.get("samples") or []]
        self.attempts[i] = self.attempts.get(i, 0) + max(1, len(tagged))
        self.samples.setdefault(i, []).extend(tagged)
        if not rec.cached and self.samples[i]:   # the cache keeps the commit's whole sample
            whole = [[self.session.id if r >= 0 else sid, r if r >= 0 else orig, v]
                     for (r, v), (sid, orig) in zip(self.samples[i], self._origins(i))]
            self.store.cache_put(self.cache_key(rec.commit), replace(
                rec, runs=[Verdict.PASS.value] * len(whole),
                details=dict(rec.details, samples=numbers(self.samples[i]), tagged=whole)))

    def _foreign(self, sid: str, rnd: int) -> int:
        """A negative round number of our own for another session's round, in its order."""
        k = self._sessions.setdefault(sid, len(self._sessions) + 1)
        return -k * FOREIGN + rnd

    def _origins(self, i: int) -> list[tuple[str, int]]:
        back = {k: sid for sid, k in self._sessions.items()}
        return [(back[-(r // FOREIGN)], r % FOREIGN) if r < 0 else ("", r)
                for r, _ in self.samples[i]]

    def result(self, found: Result) -> SessionResult:
        res = super().result(found)
        res.metric = m = self.summary(found)
        n, name = len(self.span.candidates), self.metric.name
        if self.samples.get(0) and self.samples.get(n - 1):
            old, new = (statistics.median(numbers(self.samples[i])) for i in (0, n - 1))
            res.old_outcome = f"{name} {old:.4g}"
            res.new_outcome = f"{name} {new:.4g} ({m['endpoints']['change']:+.1%})"
        return res

    def summary(self, found: Result) -> dict[str, Any]:
        n, rule, cands = len(self.span.candidates), self.metric.rule, self.span.candidates
        out: dict[str, Any] = {
            "name": self.metric.name, "better": self.metric.direction,
            "rule": {"test": rule.test.value, "p": rule.p, "min_change": rule.min_change,
                     "runs_per_round": rule.block, "max_runs": rule.max_runs},
            "samples": {cands[i]: dict(spread(numbers(s)), index=i)
                        for i, s in sorted(self.samples.items()) if s}}
        pairs = [("endpoints", 0, n - 1)]
        if found.status is Status.FOUND:
            pairs.append(("culprit", found.last_old, found.first_new))
        for key, lo, hi in pairs:
            if self.samples.get(lo) and self.samples.get(hi):
                d = endpoints(*together(self.samples[lo], self.samples[hi]), rule)
                s = d.shift
                out[key] = {"change": s.change, "low": s.low, "high": s.high,
                            "confidence": s.confidence, "p": d.p, "call": d.call,
                            "worse": (s.change > 0) == rule.lower_is_better}
        return out
