"""The one interface every executor implements.

The engine hands a backend one round of probes (one per slot) and receives each outcome
as soon as it is known. A backend knows how to build and test a commit somewhere (this
host, a container, a cluster); it knows nothing of the search.
"""
from __future__ import annotations

import json
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, Sequence

from ..history import CheckoutError
from ..search import RepeatPolicy, Verdict, combine_runs, runs_settled

PhaseCallback = Callable[["ProbeRequest", str], None]


@dataclass(frozen=True)
class ProbeRequest:
    session: str
    commit: str
    index: int
    slot: int
    runs: int                 # test executions wanted (--repeat)
    policy: RepeatPolicy
    log_dir: Path             # absolute; the backend writes build.log / test-N.log here
    artifacts: Path           # absolute; BISECT_ARTIFACTS for this commit


@dataclass
class ProbeOutcome:
    verdict: Verdict
    reason: str = ""
    exit_code: int | None = None
    build_s: float | None = None
    test_s: float | None = None
    runs: list[Verdict] = field(default_factory=list)
    logs: dict[str, Path] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    transient: bool = False   # an outcome of this run only (e.g. interrupted): never cached


class Backend(Protocol):
    name: str

    def describe(self) -> dict[str, Any]:
        """Settings worth showing in plans and reports."""

    def environment(self) -> str:
        """Where tests run, as part of the result-cache key."""

    def recipe(self) -> dict[str, Any]:
        """Everything that decides what a build produces (the cache's recipe hash)."""

    def test_recipe(self) -> dict[str, Any]:
        """Everything that decides a test's verdict (the cache's test hash)."""

    def prepare(self) -> None:
        """Check prerequisites before the first probe; raise UserError with a hint."""

    def run_round(self, requests: Sequence[ProbeRequest],
                  on_phase: PhaseCallback) -> Iterator[tuple[ProbeRequest, ProbeOutcome]]:
        """Run the probes concurrently and yield each outcome as it finishes."""

    def cancel(self) -> None:
        """Stop everything under way (Ctrl-C); called from the main thread."""


def verdict_from_exit(code: int | None) -> tuple[Verdict, str]:
    """The `git bisect run` protocol: 0 pass, 125 skip, 1-127 fail; signals are skips."""
    if code is None:
        return Verdict.SKIP, "no exit code"
    if code == 0:
        return Verdict.PASS, ""
    if code == 125:
        return Verdict.SKIP, "test exited 125 (cannot test)"
    if 1 <= code <= 127:
        return Verdict.FAIL, ""
    if code < 0:
        return Verdict.SKIP, f"test killed by signal {-code}"
    return Verdict.SKIP, f"test exited {code} (above 127: treated as a crash)"


class Cancelled(Exception):
    """The run was interrupted; the probe's outcome must not be recorded."""


@dataclass
class TestRun:
    verdict: Verdict
    reason: str
    exit_code: int | None
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)


class ThreadedRounds:
    """run_round for backends that drive each probe from a thread of this process.

    Subclasses have `worktrees` and a `_checkout_lock`; a CheckoutError raised by
    `_checkout` makes the probe a skip with its reason."""

    def _probe(self, req: ProbeRequest, on_phase: PhaseCallback) -> ProbeOutcome:
        raise NotImplementedError

    def _checkout(self, req: ProbeRequest, on_phase: PhaseCallback, *, clean: bool) -> Path:
        on_phase(req, "checkout")
        with self._checkout_lock:
            return self.worktrees.checkout(req.slot, req.commit, clean=clean)

    def cancel(self) -> None:
        raise NotImplementedError

    def run_round(self, requests: Sequence[ProbeRequest],
                  on_phase: PhaseCallback) -> Iterator[tuple[ProbeRequest, ProbeOutcome]]:
        pool = ThreadPoolExecutor(max_workers=max(1, len(requests)))
        futures = {pool.submit(self._guarded, req, on_phase): req for req in requests}
        pending = set(futures)
        try:
            while pending:
                # Wake up now and then: a signal caught by a worker thread is only acted on
                # when the main thread runs Python code.
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield futures[fut], fut.result()
        except BaseException:
            self.cancel()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _guarded(self, req: ProbeRequest, on_phase: PhaseCallback) -> ProbeOutcome:
        try:
            return self._probe(req, on_phase)
        except CheckoutError as exc:
            return ProbeOutcome(Verdict.SKIP, str(exc))
        except Cancelled:
            return ProbeOutcome(Verdict.SKIP, "interrupted", transient=True)


def run_tests(req: ProbeRequest, on_phase: PhaseCallback,
              run_once: Callable[[int], TestRun]) -> ProbeOutcome:
    """Up to req.runs test executions, stopping once the verdict is settled."""
    runs: list[TestRun] = []
    for i in range(1, req.runs + 1):
        on_phase(req, "test" if req.runs == 1 else f"test {i}/{req.runs}")
        runs.append(run_once(i))
        if runs_settled([r.verdict for r in runs], req.runs, req.policy):
            break
    verdicts = [r.verdict for r in runs]
    verdict = combine_runs(verdicts, req.policy)
    reason = ""
    if verdict is Verdict.SKIP:
        reason = next((r.reason for r in runs if r.verdict is Verdict.SKIP and r.reason),
                      "repeated runs split evenly between pass and fail")
    last = runs[-1]
    deciding = next((r for r in runs if r.verdict is verdict), last)
    return ProbeOutcome(verdict, reason, exit_code=deciding.exit_code,
                        test_s=sum(r.seconds for r in runs), runs=verdicts,
                        details=deciding.details)


def last_json_line(text: str) -> dict[str, Any]:
    """The repro protocol's last stdout line, if it is a JSON object."""
    for line in reversed(text.strip().splitlines()[-5:]):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                value = json.loads(line)
            except ValueError:
                return {}
            return value if isinstance(value, dict) else {}
    return {}
