"""Bisection on a metric (`--metric NAME`): the engine's judge (MetricJudge) takes each
probe as one run, one number.

The test prints NAME in its last JSON line; a run that exits non-zero, or prints no such
number, measured nothing and is tried again. A round runs the commits asked for one at a
time, with a run of each open end as the drift guard, and stops running a commit once it
is decided. segments.plan turns the samples into what to run next or the answer (every
change in the range, each pair confirmed by fresh runs). Numbers of other sessions never
decide. Only builds are compared: an NGC image or a nightly is built another way, and its
speed says nothing about a commit.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterator

from ..core.probes import ProbeRequest
from ..core.verdicts import ProbeOutcome
from . import sequential as seq
from .comparator import (SIZE_CONFIDENCE, Call, Difference, Judgement, Rule, all_positive,
                         drift, endpoints, judge, looks, numbers, settled, together)
from .confirmation import pair, share
from . import segments
from .power import runs_to_tell
from .tails import Tail
from ..core.inputs import Settings
from ..core.search import Result, Round, Status, Verdict, open_interval, skip_limit
from ..core.keys import digest
from ..core.records import ProbeRecord, SessionResult
from ..core import host_gpu


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


class MetricJudge:
    """The engine's judge (core/judges.py) for --metric: each probe is one run, one number,
    and a commit's call is the sequential test's (segments.plan)."""

    verifies = False      # its answer is confirmed by fresh samples (comparator.confirm) instead
    reuses = False        # numbers of another session (another machine state, another day)
    #                       never decide: every number this session compares, it measured

    def __init__(self, metric: Metric, candidates: list[str], settings: Settings):
        self.metric, self.candidates, self.settings = metric, candidates, settings
        self.samples: dict[int, list[tuple[int, float]]] = {}   # (round, number)
        self.attempts: dict[int, int] = {}
        self.tried: dict[int, list[int]] = {}      # the round of every run, numbers or not
        self.changes: tuple[tuple[int, int], ...] = ()   # every change found
        self.tail: Tail | None = None     # the endpoints' change in some runs only

    def test_key(self, key: str) -> str:
        return digest([key, "metric", self.metric.name])

    def plan(self, verdicts: dict[int, Verdict]) -> Round | Result:
        n, rule = len(self.candidates), self.metric.rule
        p = segments.plan(n, self.samples, self.attempts, rule)
        verdicts.clear()
        verdicts.update(p.verdicts)
        if p.more:
            return Round(p.more)
        if p.difference is not None and p.difference.call != "differ":
            self.tail = p.tail
            return Result(Status.INVALID_ENDPOINTS, explanation=self._apart(p))
        stop = skip_limit(n, verdicts, self.settings.max_skips)
        if p.step:
            return stop or Round(p.step)
        self.changes = p.changes
        if p.result is None:
            raise AssertionError("segments.plan gave no runs, no step and no answer")
        return p.result

    def _apart(self, p: segments.Plan) -> str:
        """Why endpoints that do not differ end the session: no change, too few runs, or
        a change in some runs only."""
        rule, d, name = self.metric.rule, p.difference, self.metric.name
        assert d is not None
        if p.tail is not None:
            return (f"the endpoints' typical runs do not differ in {name}: {d.describe(rule)}; "
                    f"but {p.tail.describe(name, rule.lower_is_better)}; bisect a number "
                    "that shows it in every run (the worst or the mean of several repeats "
                    "in one test)")
        if d.call == "same":
            return (f"the endpoints do not differ in {name}: {d.describe(rule)}; "
                    "there is no change to bisect")
        return (f"the endpoints could not be told apart within --max-runs {rule.max_runs} "
                f"in {name}: {d.describe(rule)}; {self._runs_wanted(d)}")

    def _runs_wanted(self, d: Difference) -> str:
        """How many runs of each end would tell this change, in plain words."""
        rule, change, m = self.metric.rule, d.shift.change, self.metric.rule.min_change
        ends = {i: self.samples[i] for i in (0, len(self.candidates) - 1)}
        positive = all_positive(ends)
        s = seq.relative(seq.noise([seq.scaled(numbers(e), positive) for e in ends.values()]),
                         statistics.median(numbers(self.samples[0])), positive)
        n = runs_to_tell(s, change, m, rule.alpha(len(looks(rule.max_runs)) + 1),
                         SIZE_CONFIDENCE)
        ran = min(d.n_old, d.n_new)
        goal = (f"telling {change:+.1%} apart" if abs(change) > m else
                f"telling whether {change:+.1%} stays under --min-change {m:.1%}")
        if n is None:
            return (f"the runs vary by {s:.1%} (a robust sd); {goal} needs more than 1,000 "
                    "runs of each end: quiet the machine, repeat the measurement inside the "
                    "test, or change --min-change")
        n = max(n, math.ceil(ran * 1.5))        # these runs fell short of what they should tell
        return (f"the runs vary by {s:.1%} (a robust sd); {goal} needs about {n} runs of "
                f"each end ({ran} ran): raise --max-runs to {n} (the same command goes on "
                "from these runs), or --min-change if the change is smaller")

    def batches(self, step: Round, verdicts: dict[int, Verdict]) -> Iterator[tuple[int, ...]]:
        """The round's passes (segments.passes), one commit at a time (a backend runs a
        batch's probes at once). This round's numbers are corrected by the drift its
        guard runs show."""
        n = len(self.candidates)
        for todo in segments.passes(step.indices, verdicts, n, self.samples, self.attempts,
                                    self.metric.rule):
            for i in todo:
                yield (i,)

    def request(self, req: ProbeRequest) -> ProbeRequest:
        """Each run of a commit is a probe of its own (numbered by the runs before it, so a
        resumed session asks for the one in flight again, and Slurm re-attaches to it)."""
        run = str(self.attempts.get(req.index, 0))
        return replace(req, run_key=run, log_dir=req.log_dir / f"run-{run}")   # a log a run

    def record(self, rec: ProbeRecord, out: ProbeOutcome, backend: str) -> ProbeRecord:
        value, why = measurement(out, self.metric.name)
        rec.verdict, rec.reason = (Verdict.SKIP if value is None else Verdict.PASS), why
        rec.details.update(metric=self.metric.name, samples=[] if value is None else [value])
        if backend in ("local", "docker"):    # the GPU is this host's
            rec.details["gpu_clocks"] = host_gpu.clocks()
        return rec

    def reuses_probe(self, index: int) -> bool:
        return False

    def cached_form(self, rec: ProbeRecord) -> ProbeRecord:
        return rec

    def note(self, rec: ProbeRecord, verdicts: dict[int, Verdict]) -> bool:
        i = rec.idx
        numbers_ = [(rec.round, float(v)) for v in rec.details.get("samples") or []]
        self.attempts[i] = self.attempts.get(i, 0) + max(1, len(numbers_))
        self.tried.setdefault(i, []).extend([rec.round] * max(1, len(numbers_)))
        self.samples.setdefault(i, []).extend(numbers_)
        return True

    def answer(self, found: Result) -> Result:
        if found.status is Status.AMBIGUOUS and found.skipped and not found.stopped_early:
            return replace(found, explanation=(
                f"{len(found.skipped)} commit(s) between the last like-old and the first "
                "like-new commit could not be placed (unresolved within --max-runs, or like "
                "neither side: see the measurements); the same command with a higher "
                "--max-runs goes on from these runs to resolve them"))
        return found

    def continues(self, previous: SessionResult) -> bool:
        """A session that ran out of runs goes on, with every number it measured, when only
        --max-runs was raised since (its rule otherwise the same): its endpoints were
        still unknown, or they differed and the answer stayed ambiguous. If so, this judge
        takes on its earlier --max-runs (their last looks stay looks)."""
        m = previous.metric or {}
        was, now = m.get("rule", {}), self.metric.rule
        same = (was.get("p"), was.get("min_change"), was.get("runs_per_round"),
                m.get("better")) == (now.p, now.min_change, now.block, self.metric.direction)
        call = m.get("endpoints", {}).get("call")
        wanting = call == "unknown" or (call == "differ" and
                                        previous.status == Status.AMBIGUOUS.value)
        if not (same and wanting and was.get("max_runs", now.max_runs) < now.max_runs):
            return False
        earlier = (*was.get("earlier", ()), was["max_runs"])
        self.metric = replace(self.metric, rule=replace(now, earlier=tuple(earlier)))
        return True

    def finish(self, found: Result, res: SessionResult) -> SessionResult:
        res.metric = m = self.summary(found)
        n, name = len(self.candidates), self.metric.name
        # one size of the change wherever it is printed: the culprit's, else the endpoints'
        lo, hi, key = (found.last_old, found.first_new, "culprit") if "culprit" in m and \
            found.last_old is not None and found.first_new is not None else (0, n - 1,
                                                                              "endpoints")
        if self.samples.get(lo) and self.samples.get(hi) and key in m:
            old, new = (statistics.median(numbers(self.samples[i])) for i in (lo, hi))
            res.old_outcome = f"{name} {old:.4g}"
            res.new_outcome = f"{name} {new:.4g} ({m[key]['change']:+.2%})"
        return res

    def summary(self, found: Result) -> dict[str, Any]:
        n, rule, cands = len(self.candidates), self.metric.rule, self.candidates
        j = judge(n, self.samples, self.attempts, rule, settled(n, self.samples, rule))
        out: dict[str, Any] = {
            "name": self.metric.name, "better": self.metric.direction,
            "rule": {"test": "yuen+sprt", "p": rule.p, "min_change": rule.min_change,
                     "runs_per_round": rule.block, "max_runs": rule.max_runs,
                     "earlier": list(rule.earlier)},
            "samples": {cands[i]: dict(spread(numbers(s)), index=i, runs=self.attempts[i],
                                       **call_of(i, n, j, self.attempts[i], rule))
                        for i, s in sorted(self.samples.items()) if s},
            "rounds": self.narrowing(),
            "drift": {str(r): d for r, d in drift(self.samples, j.verdicts).items()}}
        pairs = [("endpoints", 0, n - 1)]
        if found.status is Status.FOUND and found.last_old is not None and \
                found.first_new is not None:
            pairs.append(("culprit", found.last_old, found.first_new))
        for key, lo, hi in pairs:
            if self.samples.get(lo) and self.samples.get(hi):
                # the endpoints as decided (their numbers and call then), once they were
                d = (j.difference or endpoints(*together(self.samples[lo], self.samples[hi]),
                                               rule)
                     if key == "endpoints" else pair(lo, hi, self.samples, rule))
                if d is None:
                    continue
                s = d.shift
                out[key] = {"change": s.change, "low": s.low, "high": s.high,
                            "confidence": s.confidence, "p": d.p, "call": d.call,
                            "worse": (s.change > 0) == rule.lower_is_better}
        if out.get("endpoints", {}).get("call", "differ") != "differ":
            out["some_runs"] = asdict(self.tail) if self.tail else None
        if len(self.changes) > 1 and "endpoints" in out:
            total = out["endpoints"]["change"]
            out["changes"] = []
            for lo, hi in self.changes:
                d = pair(lo, hi, self.samples, rule)
                if d is None:           # confirmed changes were measured side by side
                    continue
                s = d.shift
                out["changes"].append({
                    "last_old": cands[lo], "first_new": cands[hi], "index": hi,
                    "change": s.change, "low": s.low, "high": s.high,
                    "share": share(s.change, total),
                    "worse": (s.change > 0) == rule.lower_is_better})
        return out

    def narrowing(self) -> list[list[int]]:
        """[round, runs, old end, new end] after each round: the judgement replayed on the
        numbers measured up to it."""
        n, rule = len(self.candidates), self.metric.rule
        rows = []
        for r in sorted({k for rounds in self.tried.values() for k in rounds}):
            upto = {i: [(k, v) for k, v in s if k <= r] for i, s in self.samples.items()}
            tries = {i: sum(1 for k in rounds if k <= r) for i, rounds in self.tried.items()}
            j = judge(n, upto, {i: t for i, t in tries.items() if t}, rule,
                      settled(n, upto, rule))
            lo, hi = (open_interval(n, j.verdicts) if j.verdicts.get(0) is Verdict.PASS and
                      j.verdicts.get(n - 1) is Verdict.FAIL else (0, n - 1))
            rows.append([r, sum(rounds.count(r) for rounds in self.tried.values()), lo, hi])
        return rows


def call_of(i: int, n: int, j: Judgement, runs: int, rule: Rule) -> dict[str, str]:
    """What the numbers say of commit i, and why, in words for the report."""
    if i in (0, n - 1):
        return {"call": "old endpoint" if i == 0 else "new endpoint",
                "why": "the side every commit is compared with"}
    verdict, call = j.verdicts.get(i), j.calls.get(i)
    if verdict is Verdict.PASS:
        return {"call": "like old", "why": "the sequential test chose the old side"}
    if verdict is Verdict.FAIL:
        return {"call": "like new", "why": "the sequential test chose the new side"}
    if call is Call.NEITHER:
        return {"call": "like neither", "why": "its numbers differ from both sides: the "
                "change is spread over several commits, or goes up and back down"}
    if verdict is Verdict.SKIP and call is None:
        return {"call": "no number", "why": f"{runs} run(s) printed no number"}
    if verdict is Verdict.SKIP:
        return {"call": "unresolved", "why": f"still unclear after {runs} runs "
                f"(--max-runs {rule.max_runs})"}
    return {"call": "undecided", "why": "the search ended before it was needed"}
