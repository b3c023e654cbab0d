"""The engine's judge for pass/fail bisections: every run enters a belief (belief.py), the
next runs come from it, and the answer is given once it reaches the stated confidence
with its premises seen in this session.

- **Every run counts.** A probe's runs (under --repeat, several) each update the belief;
  a cached probe of another session enters as its runs too, and a later run that
  contradicts them updates it again (the cache keeps every run of a commit).
- **The next runs** are the commits whose side a run tells most about, per second: a
  commit already built costs its test, a new one its build too (as measured in this
  session). An untestable commit stays a skip and is searched around.
- **The answer** is the most probable hypothesis once its probability reaches
  --confidence and its premises were observed fresh, in this session: the answer showed
  the new behaviour and its parent the old one, each at least --verify times (for "no
  change", each endpoint). Short of that within the budget of runs, or where only
  untestable commits could still tell, the answer is ambiguous, with the candidates and
  their probabilities.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Iterator

from .advice import kept_build, stale_cache
from .belief import Answer, Belief, Posterior, Prior, pick
from .inputs import Settings
from .probes import ProbeRequest
from .records import ProbeRecord, SessionResult
from .search import Result, Round, Status, Verdict, endpoint_problem, skip_chances
from .verdicts import ProbeOutcome

ALIKE_AGAIN = 3   # runs of each endpoint before "alike", from a test that showed both


class BeliefJudge:
    verifies = False     # the premises are part of the answer, not a re-run after it
    reuses = True        # a cached probe's runs enter the belief (as evidence, never final)

    def __init__(self, candidates: list[str], settings: Settings, prior: Prior | None = None):
        self.n, self.candidates = len(candidates), candidates
        self.settings, self.confidence = settings, settings.confidence
        self.belief = Belief(self.n, prior)
        self.fresh = {"pass": [0] * self.n, "fail": [0] * self.n}
        self.probed: dict[int, int] = {}          # probes of each commit in this session
        self.untestable: set[int] = set()
        self.cost = {"build": 0.0, "test": 0.0, "builds": 0, "tests": 0}
        self.built: set[int] = set()
        self.runs_of: dict[int, list[str]] = {}   # every run of a commit (for the cache)
        self.from_cache: dict[int, set[str]] = {}  # the outcomes an earlier session left
        self.on_build: dict[int, dict[bool, set[str]]] = {}  # fresh outcomes: kept build?
        self.last: Posterior | None = None

    # --- the engine's hooks --------------------------------------------------------
    def test_key(self, key: str) -> str:
        return key

    def reuses_probe(self, index: int) -> bool:
        """A cached verdict may stand in for a commit's first probe only; every later one
        is a fresh run."""
        return index not in self.probed

    def note(self, rec: ProbeRecord, verdicts: dict[int, Verdict]) -> bool:
        i = rec.idx
        self.probed[i] = self.probed.get(i, 0) + 1
        runs = [r for r in rec.runs if r in ("pass", "fail")]
        if runs:
            self.untestable.discard(i)
        elif rec.verdict is Verdict.SKIP and not self.runs_of.get(i):
            self.untestable.add(i)      # a skip after runs is a lost run, not an untestable commit
        for r in runs:
            self.belief.add(i, r == "fail")
            if not rec.cached:
                self.fresh[r][i] += 1
        self.runs_of.setdefault(i, []).extend(runs)
        if rec.cached:
            self.from_cache.setdefault(i, set()).update(runs)
        elif runs:
            kept = bool(rec.details.get("build_reused"))
            self.on_build.setdefault(i, {True: set(), False: set()})[kept].update(runs)
        if not rec.cached:
            self._measure(rec)
        return False                      # the engine keeps the last verdict of each commit

    def _measure(self, rec: ProbeRecord) -> None:
        if rec.build_s is not None and not rec.details.get("build_reused"):
            self.cost["build"] += rec.build_s
            self.cost["builds"] += 1
        if rec.test_s:
            self.cost["test"] += rec.test_s
            self.cost["tests"] += max(1, len(rec.runs))
        self.built.add(rec.idx)

    def cached_form(self, rec: ProbeRecord) -> ProbeRecord:
        """What the cache keeps of a commit: every run of it so far (this probe's, not yet
        noted, included), not the last alone."""
        return replace(rec, runs=self.runs_of.get(rec.idx, []) + list(rec.runs))

    def plan(self, verdicts: dict[int, Verdict]) -> Round | Result:
        step = self._plan(verdicts)
        clash = self._kept_clash()
        if isinstance(step, Result) and step.status is not Status.FOUND and clash:
            step = replace(step, explanation=f"{step.explanation}; {kept_build(clash[0])}")
        return step

    def _kept_clash(self) -> list[int]:
        """Commits whose runs on the kept build all disagree with those right after its
        build: the build left something outside what is kept."""
        return sorted(i for i, by in self.on_build.items()
                      if by[True] and by[False] and not by[True] & by[False])

    def _plan(self, verdicts: dict[int, Verdict]) -> Round | Result:
        n = self.n
        ends = tuple(i for i in (0, n - 1) if i not in self.probed)
        if ends:
            return Round(ends)
        if 0 in self.untestable or n - 1 in self.untestable:
            old, new = (Verdict.SKIP if i in self.untestable else verdicts[i]
                        for i in (0, n - 1))
            return Result(Status.INVALID_ENDPOINTS, explanation=endpoint_problem(old, new),
                          old_outcome=old, new_outcome=new,
                          skipped=tuple(sorted(self.untestable)))
        post = self.last = self.belief.posterior()
        best = post.answers(self.untestable)[0]
        if best.p >= self.confidence or self._never_differed(best):
            missing = self._premises(best)
            if not missing:
                return self._answer(best)
            return Round(missing)
        stop = self._stop(post)
        if stop is not None:
            return stop
        testable = [1.0 - q for q in skip_chances(n, self.untestable)]
        chosen = pick(post, max(1, self.settings.jobs), testable, self._costs())
        return Round(tuple(sorted(chosen))) if chosen else self._ambiguous(
            post, "the commits that could still tell cannot be tested")

    def batches(self, step: Round, verdicts: dict[int, Verdict]) -> Iterator[tuple[int, ...]]:
        yield step.indices

    def request(self, req: ProbeRequest) -> ProbeRequest:
        k = self.probed.get(req.index, 0)
        if k == 0:
            return req
        return replace(req, run_key=f"run-{k}", log_dir=req.log_dir / f"run-{k}")

    def record(self, rec: ProbeRecord, out: ProbeOutcome, backend: str) -> ProbeRecord:
        return rec

    def answer(self, found: Result) -> Result:
        return found

    def continues(self, previous: SessionResult) -> bool:
        return False        # every run is kept already: a new session weighs them all

    def finish(self, found: Result, res: SessionResult) -> SessionResult:
        post = self.last or self.belief.posterior()
        res.belief = summary(post, self.belief, self.untestable)
        stale = self._stale()
        if stale:
            res.belief["stale"] = stale
            res.belief["stale_advice"] = stale_cache([self.candidates[i] for i in stale])
        res.confidence = res.belief["probability"]
        return res

    def _stale(self) -> list[int]:
        """The commits whose cached runs all disagree with every fresh run of them, where
        no commit's agree: a cache key blind to what the test reads, not a flaky test."""
        fresh = {i: {side for side in ("pass", "fail") if self.fresh[side][i]}
                 for i in self.from_cache}
        clash = [i for i, old in self.from_cache.items()
                 if old and fresh[i] and not old & fresh[i]]
        agree = [i for i, old in self.from_cache.items() if old & fresh[i]]
        return sorted(clash) if len(clash) >= 2 and not agree else []

    # --- the rule ------------------------------------------------------------------
    def _never_differed(self, best: Answer) -> bool:
        """Both endpoints behaved alike and no run of this test ever behaved otherwise (a
        cached one included): a test that never failed has nothing to weigh. Where the
        test showed both behaviours before (`Prior.differed`), the endpoints run again
        first (`_premises`), and a test known to be flaky is weighed in full."""
        b = self.belief
        if b.prior.differed and b.prior.deterministic < 0.5:
            return False
        return (best.kind == "all-good" and not any(b.fails)) or \
            (best.kind == "all-bad" and not any(b.passes))

    def _premises(self, best: Answer) -> tuple[int, ...]:
        """The runs the answer still needs fresh in this session, --verify of each side
        (once by default): the answer's first new commit new and its parent old; for no
        change, each endpoint as it behaved."""
        need = max(1, self.settings.premises)
        if not best.change:
            side = "fail" if best.kind == "all-bad" else "pass"
            need = max(need, ALIKE_AGAIN if self.belief.prior.differed else 1)
            return tuple(i for i in (0, self.n - 1) if self.fresh[side][i] < need)
        new, old = ("fail", "pass") if best.kind == "regression" else ("pass", "fail")
        parent, first = best.ks[0] - 1, best.ks[-1]
        return tuple(i for i, side in ((parent, old), (first, new))
                     if self.fresh[side][i] < need)

    def _costs(self) -> list[float]:
        c = self.cost
        test = c["test"] / c["tests"] if c["tests"] else 1.0
        build = c["build"] / c["builds"] if c["builds"] else 0.0
        return [test + (0.0 if i in self.built else build) for i in range(self.n)]

    def _stop(self, post: Posterior) -> Result | None:
        budget = 30 * (math.ceil(math.log2(self.n)) + 2)
        if self.belief.runs() >= budget:
            return self._ambiguous(post, f"the belief did not reach {percent(self.confidence)} "
                                         f"within {budget} runs")
        skips = self.settings.max_skips
        inner = [i for i in self.untestable if 0 < i < self.n - 1]
        if skips and len(inner) > skips:
            res = self._ambiguous(post, f"stopped after {len(inner)} untestable commits (more "
                                        f"than --max-skips {skips})")
            return replace(res, stopped_early=True)
        return None

    def _answer(self, best: Answer) -> Result:
        skipped = tuple(sorted(self.untestable))
        runs = self.belief.runs()
        if not best.change:
            side = Verdict.FAIL if best.kind == "all-bad" else Verdict.PASS
            why = endpoint_problem(side, side)
            b = self.belief
            if any(b.fails) and any(b.passes):     # a flaky test: say what the runs were
                ends = "; ".join(f"the {name} endpoint failed {b.fails[i]} of "
                                 f"{b.fails[i] + b.passes[i]} runs"
                                 for name, i in (("old", 0), ("new", self.n - 1)))
                why = (f"the runs fit one failure rate across the range better than a change "
                       f"({percent(best.p)} sure, from {runs} runs; {ends}); check that the "
                       "test really tells the two releases apart")
            return Result(Status.INVALID_ENDPOINTS, old_outcome=side, new_outcome=side,
                          explanation=why, skipped=skipped)
        old, new = (Verdict.PASS, Verdict.FAIL) if best.kind == "regression" else \
            (Verdict.FAIL, Verdict.PASS)
        first, parent = best.ks[-1], best.ks[0] - 1
        if len(best.ks) == 1:
            return Result(Status.FOUND, first_new=first, last_old=parent, candidates=(first,),
                          old_outcome=old, new_outcome=new, skipped=skipped)
        return Result(Status.AMBIGUOUS, last_old=parent, candidates=best.ks,
                      old_outcome=old, new_outcome=new, skipped=skipped,
                      explanation=f"{len(best.ks) - 1} untestable commit(s) lie between the "
                                  "last old-behaviour commit and the first new-behaviour "
                                  f"commit ({percent(best.p)} sure, from {runs} runs)")

    def _ambiguous(self, post: Posterior, why: str) -> Result:
        ranked = sorted(post.first_new().items(), key=lambda kv: -kv[1])
        held, kept = 0.0, []
        for k, p in ranked:             # the fewest commits that hold 99% of the belief
            kept.append(k)
            held += p
            if held >= 0.99 or len(kept) >= 200:
                break
        best = post.answers(self.untestable)[0]
        old, new = (Verdict.FAIL, Verdict.PASS) if best.kind == "fix" else \
            (Verdict.PASS, Verdict.FAIL)
        shown = ", ".join(f"#{k} {percent(p)}" for k, p in ranked[:5] if p >= 0.005)
        return Result(Status.AMBIGUOUS, candidates=tuple(sorted(kept)),
                      last_old=min(kept) - 1 if kept else None, old_outcome=old,
                      new_outcome=new, skipped=tuple(sorted(self.untestable)),
                      explanation=f"{why}; the most probable: {shown or 'none stands out'}")


def summary(post: Posterior, belief: Belief, untestable: set[int]) -> dict[str, Any]:
    """The belief as the answer, --json, log and the report state it: the most probable
    answer's probability, the runs behind it, and how often the new side failed to show
    the new behaviour."""
    best = post.answers(untestable)[0]
    p, fix = best.p, best.kind == "fix"
    new_side = [i for i in range(belief.n) if (post.bad[i] > 0.5) != fix]
    shown = sum((belief.passes if fix else belief.fails)[i] for i in new_side)
    missed = sum((belief.fails if fix else belief.passes)[i] for i in new_side)
    return {"probability": _floor6(p), "runs": belief.runs(),
            "deterministic": round(post.deterministic, 6), "shows": round(post.q, 4),
            "unrelated": round(post.eps, 4), "new_side_runs": shown + missed,
            "new_side_missed": missed,
            "candidates": {str(k): _floor6(v) for k, v in sorted(
                post.first_new().items(), key=lambda kv: -kv[1])[:10] if v >= 0.001}}


def _floor6(p: float) -> float:
    """Six places, rounded down: a stated 1.0 would claim certainty."""
    return math.floor(p * 1e6) / 1e6


def belief_words(belief: dict[str, Any]) -> str:
    """A summary() in words: "99.4%, from 13 runs; the test failed to show the new
    behaviour in 3 of 9 runs on the new side"."""
    words = f"{percent(belief['probability'])}, from {belief['runs']} runs"
    if belief.get("new_side_missed"):
        words += (f"; the test failed to show the new behaviour in "
                  f"{belief['new_side_missed']} of {belief['new_side_runs']} runs on the new "
                  "side")
    return words


def percent(p: float) -> str:
    """A probability as a percentage, rounded down: 25.0%, 99.4%; past 99%, two places
    (99.96%), and never "100%" for what is only nearly sure."""
    if p < 0.99:
        return f"{math.floor(p * 1000) / 10:.1f}%"
    return "over 99.99%" if p >= 0.9999 else f"{math.floor(p * 10000) / 100:.2f}%"
