"""The one interface every executor implements, and what executors share.

The engine hands a backend one round of probes (one per slot) and receives each outcome
as soon as it is known. A backend knows how to build and test a commit somewhere (this
host, a container, a cluster); it knows nothing of the search. Backends report facts
(exit codes, timeouts, the test's JSON line); `verdicts.judge_probe` turns those into a
verdict and a reason, worded the same for every backend.
"""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, Sequence

from ..vcs.build_trees import settle
from ..core.environments import Environment, of_probe
from ..errors import UserError
from ..vcs.mirrors import CheckoutError
from ..vcs.history import Worktrees
from ..core.search import RepeatPolicy, Verdict, runs_settled
from ..vcs.submodules import SubmoduleCache
from ..core.verdicts import (BuildFact, ProbeOutcome, RunFact, judge_build, judge_probe,
                             judge_run)

if TYPE_CHECKING:
    from ..core.artifacts import ArtifactStore
    from ..vcs.history import History
    from ..core.recipes import Recipe
    from ..core.store import Store

PhaseCallback = Callable[["ProbeRequest", str], None]


class ProbeKind(str, Enum):
    """How a probe gets its torch: the tiers, cheapest first, then a build."""

    IMAGE = "image"          # an NGC image as it ships
    NIGHTLY = "nightly"      # a nightly wheel
    PREBUILT = "prebuilt"    # a given artifact (--artifacts)
    OVERLAY = "overlay"      # a neighbour's wheel with this commit's Python files
    BUILD = "build"          # built from source

    def __str__(self) -> str:        # paths and messages show the value
        return self.value


@dataclass(frozen=True)
class Source:
    """A prebuilt way to probe one candidate, cheaper than a build: an NGC image as it is,
    a nightly wheel, or a neighbour's wheel with this commit's Python files (an overlay)."""

    tier: ProbeKind    # any kind but BUILD
    ref: str           # the image reference, the wheel's URL, or the overlay's store key
    label: str         # for people: "NGC 24.09", "nightly 2024-09-01", "overlay of abc123"
    reports: str = ""  # the torch commit the artifact reports, where not the candidate
    why: str = ""      # why this source was chosen, for the probe record


@dataclass(frozen=True)
class ProbeRequest:
    session: str
    commit: str
    index: int
    slot: int
    runs: int                 # test executions wanted (--repeat)
    policy: RepeatPolicy
    log_dir: Path             # absolute; the backend writes build.log / test-N.log here
    artifacts_dir: Path       # absolute; BISECT_ARTIFACTS for this commit
    expect_commit: bool = False   # the test's JSON must report torch_git_version == commit
    source: Source | None = None  # probe this prebuilt artifact instead of building
    run_key: str = ""         # tells apart repeated probes of one commit in a session

    @property
    def key(self) -> str:
        """This probe's name among the session's: the commit, or commit#run_key."""
        return f"{self.commit}#{self.run_key}" if self.run_key else self.commit

    @property
    def tier(self) -> ProbeKind:
        return ProbeKind(self.source.tier) if self.source else ProbeKind.BUILD

    def environment(self, base_image: str | None, companions: Sequence[str] = ()
                    ) -> Environment:
        """Where this probe's test runs: an image as it is, or the base image (the host
        without one) with this probe's wheel installed; then the --with companions."""
        return of_probe(self.tier.value, self.source.ref if self.source else "", base_image,
                        companions)

    @property
    def expected(self) -> str | None:
        """The torch commit the test must report, if it is checked."""
        if not self.expect_commit:
            return None
        return (self.source.reports if self.source and self.source.reports else self.commit)


@dataclass(frozen=True)
class TestPlan:
    """A probe's environment as every backend makes it: the image its test runs in (None:
    the host), the test command, and where the artifacts come from: nowhere (an image
    as it is), a download or overlay that is ready, or a build."""

    artifacts: str          # "none" | "ready" | "build"
    image: str | None
    test: str


def test_plan(req: "ProbeRequest", recipe: "Recipe") -> TestPlan:
    """The one mapping from a probe's kind to what a backend does for it."""
    if req.tier is ProbeKind.IMAGE:
        return TestPlan("none", req.source.ref, recipe.test_as_is or recipe.test)
    return TestPlan("build" if req.tier is ProbeKind.BUILD else "ready", recipe.image,
                    recipe.test)


@dataclass
class BackendSetup:
    """Everything a backend is made from; `backends.create` passes it to `Backend.create`."""

    recipe: "Recipe"
    history: "History"
    store: "Store"
    cache_dir: Path
    artifact_store: Path            # the one content-addressed build store
    say: Callable[[str], None]
    options: dict[str, Any] = field(default_factory=dict)   # backend-specific settings

    @property
    def state(self) -> Path:
        return self.store.root

    def worktrees(self, root: Path, submodules: Path | None = None) -> Worktrees:
        """Probe slots under `root`, their submodules from the shared object cache
        (default CACHE/submodules; where the probes run must see it too: a slot's
        submodules borrow its objects)."""
        return Worktrees(self.history, root,
                         SubmoduleCache(submodules or self.cache_dir / "submodules"))


class Backend(Protocol):
    name: str
    tiers: tuple[str, ...]      # the kinds of Source it can probe besides builds

    def describe(self) -> dict[str, Any]:
        """Where and how probes run (partitions, host, image digest), for plans and reports."""

    def environment(self) -> str:
        """Where tests run, as part of the result-cache key."""

    def prepare(self) -> None:
        """Check prerequisites before the first probe; raise UserError with a hint."""

    def run_round(self, requests: Sequence[ProbeRequest],
                  on_phase: PhaseCallback) -> Iterator[tuple[ProbeRequest, ProbeOutcome]]:
        """Run the probes concurrently and yield each outcome as it finishes."""

    def cancel(self) -> None:
        """Stop everything under way (Ctrl-C); called from the main thread."""


class Cancelled(Exception):
    """The run was interrupted; the probe's outcome must not be recorded."""


class BackendLost(UserError):
    """The engine or cluster itself is gone: the session stops (exit 2) instead of
    turning every remaining probe into a skip."""


class ProbeFailed(Exception):
    """One probe could not run for a reason of its own (a container API error): a skip
    that is not cached."""


def fetch_prebuilt(artifacts: "ArtifactStore", req: ProbeRequest,
                   say: Callable[[str], None]) -> Path:
    """The directory holding the probe's prebuilt artifact; a failed download is this
    probe's skip (ProbeFailed), not the session's end."""
    if req.source.tier == "overlay":          # written into the store by the controller
        art = artifacts.get(req.source.ref)
        if art is None:
            raise ProbeFailed(f"the {req.source.label} artifact is missing from the store")
        return art.path
    try:
        return artifacts.fetch(req.source.ref, say).path
    except (OSError, ValueError) as exc:
        raise ProbeFailed(f"could not download {req.source.label}: {exc}") from None


def probe_env(req: ProbeRequest, worktree: Path) -> dict[str, str]:
    return {"BISECT_COMMIT": req.commit, "BISECT_WORKTREE": str(worktree),
            "BISECT_ARTIFACTS": str(req.artifacts_dir)}


# A log past LOG_CAP keeps its first LOG_HEAD bytes and its end (where errors and the
# test's JSON line are); the middle goes, with a line that says so.
LOG_CAP, LOG_HEAD = 16 << 20, 1 << 20


def cap_log(path: Path, cap: int = LOG_CAP, head: int = LOG_HEAD) -> None:
    try:
        size = path.stat().st_size
    except OSError:
        return
    if size <= cap:
        return

    def words(cut: int) -> bytes:
        return f"\n[bisect-ngc: {cut} bytes of this log cut; its start and end are kept]\n" \
            .encode()
    tail = cap - head - len(words(size - cap)) - 1      # the count has one digit more at most
    marker = words(size - head - tail)
    with open(path, "r+b") as f:
        f.seek(size - tail)
        end = f.read()
        f.seek(head)
        f.write(marker + end)
        f.truncate()


def in_batches(backend: "Backend", requests: Sequence[ProbeRequest], jobs: int,
               on_phase: PhaseCallback) -> Iterator[tuple[ProbeRequest, ProbeOutcome, float]]:
    """At most `jobs` probes at a time (--jobs), each outcome with the time its batch
    started: a round's first batch, the endpoints, included."""
    for start in range(0, len(requests), jobs):
        began = time.time()
        for req, outcome in backend.run_round(requests[start:start + jobs], on_phase):
            yield req, outcome, began


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


def run_tests(req: ProbeRequest, on_phase: PhaseCallback,
              run_once: Callable[[int], RunFact] | None, build: BuildFact | None) -> ProbeOutcome:
    """Up to req.runs test executions, stopping once the verdict is settled; none when
    the build failed."""
    expect = req.expected
    facts: list[RunFact] = []
    if build is not None and judge_build(build) is not None:
        return judge_probe(build, facts, req.policy, expect)
    for i in range(1, req.runs + 1):
        on_phase(req, "test" if req.runs == 1 else f"test {i}/{req.runs}")
        facts.append(run_once(i))
        if runs_settled([judge_run(f, expect)[0] for f in facts], req.runs, req.policy):
            break
    return judge_probe(build, facts, req.policy, expect)


class ThreadedRounds:
    """run_round for backends that drive each probe from a thread of this process.

    Subclasses have `worktrees` and implement `_probe` and `cancel`. A CheckoutError or a
    ProbeFailed raised by a probe makes it a skip with its reason; a BackendLost ends the
    session."""

    worktrees: Any
    recipe: Any

    def __init__(self) -> None:
        self._checkout_lock = threading.Lock()
        self._checkout_s: dict[str, float] = {}
        self._tree_notes: dict[str, str] = {}

    def _probe(self, req: ProbeRequest, on_phase: PhaseCallback) -> ProbeOutcome:
        raise NotImplementedError

    def cancel(self) -> None:
        raise NotImplementedError

    def build_trees(self, slot: int) -> list[Path]:
        """Build trees this backend keeps for a slot outside its worktree."""
        return []

    def _kept(self, req: ProbeRequest, clean: bool) -> list[Path]:
        """What survives the checkout of the slot's worktree besides tracked files."""
        wt = self.worktrees.path(req.slot)
        if not (wt / ".git").exists():
            return self.build_trees(req.slot)
        inside = [wt / p.strip("/") for p in self.recipe.keep] if clean else [wt]
        return inside + self.build_trees(req.slot)

    def _checkout(self, req: ProbeRequest, on_phase: PhaseCallback, *, clean: bool) -> Path:
        on_phase(req, "checkout")
        start = time.monotonic()
        r = self.recipe
        note = settle(self._kept(req, clean))
        if note:
            self._tree_notes[req.commit] = note
        try:
            with self._checkout_lock:
                return self.worktrees.checkout(req.slot, req.commit, clean=clean,
                                               keep=tuple(r.keep), submodules=r.submodules)
        finally:
            self._checkout_s[req.commit] = time.monotonic() - start

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
            outcome = self._probe(req, on_phase)
        except (CheckoutError, ProbeFailed) as exc:
            outcome = ProbeOutcome(Verdict.SKIP, str(exc), cacheable=False)
        except Cancelled:
            return ProbeOutcome(Verdict.SKIP, "interrupted", transient=True)
        outcome.checkout_s = self._checkout_s.pop(req.commit, None)
        note = self._tree_notes.pop(req.commit, None)
        if note:
            outcome.details = dict(outcome.details, kept_tree=note)
        return outcome
