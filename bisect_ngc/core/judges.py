"""How probes become the search's verdicts, and what a round probes: the strategy the engine
is given. PassFail takes each probe's verdict as it is (release mode's tiers search with
it); belief_judge.py's BeliefJudge weighs every run under a flake model (any other
pass/fail bisection); metric/measured.py's MetricJudge measures instead (one number a run,
a sequential test per commit)."""
from __future__ import annotations

from typing import Iterator, Protocol

from .probes import ProbeRequest
from .records import ProbeRecord, SessionResult
from .search import Result, Round, Verdict
from .verdicts import ProbeOutcome


class Judge(Protocol):
    verifies: bool      # the answer's pair is run again before it is given (rerun.py)
    reuses: bool        # a cached probe (another session's) may decide a commit

    def test_key(self, key: str) -> str:
        """The result cache's test key under this judge."""

    def plan(self, verdicts: dict[int, Verdict]) -> Round | Result | None:
        """The next round or the answer; None leaves it to the engine (tiers, overlays)."""

    def batches(self, step: Round, verdicts: dict[int, Verdict]
                ) -> Iterator[tuple[int, ...]]:
        """The probes of a round, in batches run one after the other; each batch's
        outcomes are noted before the next is asked for."""

    def request(self, req: ProbeRequest) -> ProbeRequest:
        """A probe as this judge wants it run."""

    def record(self, rec: ProbeRecord, out: ProbeOutcome, backend: str) -> ProbeRecord:
        """What is stored of a probe."""

    def note(self, rec: ProbeRecord, verdicts: dict[int, Verdict]) -> bool:
        """Take in a stored probe; False leaves its verdict to the engine."""

    def reuses_probe(self, index: int) -> bool:
        """Whether a cached probe may stand in for this commit's next probe."""

    def cached_form(self, rec: ProbeRecord) -> ProbeRecord:
        """What the result cache keeps of a probe."""

    def answer(self, found: Result) -> Result:
        """The answer as this judge words it."""

    def finish(self, found: Result, res: SessionResult) -> SessionResult:
        """The session's result, with what this judge adds."""

    def continues(self, previous: SessionResult) -> bool:
        """Whether a finished session of the same question goes on under this judge's
        settings rather than a new one starting (it ended for want of runs now allowed)."""


class PassFail:
    """Each probe's verdict as it is (with --repeat, as its policy says)."""

    verifies = True
    reuses = True

    def test_key(self, key: str) -> str:
        return key

    def plan(self, verdicts: dict[int, Verdict]) -> Round | Result | None:
        return None

    def batches(self, step: Round, verdicts: dict[int, Verdict]
                ) -> Iterator[tuple[int, ...]]:
        yield step.indices

    def request(self, req: ProbeRequest) -> ProbeRequest:
        return req

    def record(self, rec: ProbeRecord, out: ProbeOutcome, backend: str) -> ProbeRecord:
        return rec

    def note(self, rec: ProbeRecord, verdicts: dict[int, Verdict]) -> bool:
        return False

    def reuses_probe(self, index: int) -> bool:
        return True

    def cached_form(self, rec: ProbeRecord) -> ProbeRecord:
        return rec

    def answer(self, found: Result) -> Result:
        return found

    def finish(self, found: Result, res: SessionResult) -> SessionResult:
        return res

    def continues(self, previous: SessionResult) -> bool:
        return False
