"""The one interface every executor implements: the probes the engine hands a backend,
and the Backend protocol with its optional capabilities.

The engine hands a backend one round of probes (one per slot) and receives each outcome
as soon as it is known. A backend knows how to build and test a commit somewhere (this
host, a container, a cluster); it knows nothing of the search. Backends report facts
(exit codes, timeouts, the test's JSON line); `verdicts.judge_probe` turns those into a
verdict and a reason, worded the same for every backend. What executors share beyond
this interface (thread pools, logs, prebuilt artifacts) is in `backends/base.py`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, Sequence

from ..errors import UserError
from ..vcs.worktrees import Worktrees
from ..vcs.submodules import SubmoduleCache
from .environments import Environment, of_probe
from .search import RepeatPolicy
from .verdicts import ProbeOutcome

if TYPE_CHECKING:
    from ..vcs.history import History
    from .recipes import Recipe
    from .store import Store

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
    if req.tier is ProbeKind.IMAGE and req.source is not None:
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


class Containers(Protocol):
    """What attribution needs from a container engine."""

    work_dir: Path | None     # where swaps are made, where the probes see it (else the cache)

    def digest(self, image: str) -> str: ...
    def config_env(self, image: str) -> list[str]: ...
    def python_json(self, image: str, script: str, args: list[str],
                    mounts: list[tuple[Path, str, bool]]) -> str: ...
    def run(self, image: str, command: str, env: dict[str, str],
            mounts: list[tuple[Path, str, bool]]) -> int | None: ...
    def output(self, image: str, command: str, env: dict[str, str],
               mounts: list[tuple[Path, str, bool]]) -> tuple[int | None, str]: ...


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

    # Optional capabilities: every backend answers, with None or [] where it lacks one.
    def containers(self) -> Containers | None:
        """Runs images as they are, for swap probes and attribution."""

    def dry_run(self, requests: Sequence[ProbeRequest]) -> list[tuple[str, str]]:
        """The scripts it would run for these probes, as (name, text), where it renders any."""

    def prefetch(self, images: Sequence[str], *, done: bool = False) -> None:
        """Start getting these images in the background (the next round's likely ones),
        where it has images to get; a failure is left for the probe that needs one. A new
        list drops what had not started; done: the session needs no more images, so stop
        what is under way too, where the backend can."""

    def submit_controller(self, session: str, argv: list[str], *, partition: str | None,
                          time_limit: str) -> tuple[str, Path]:
        """Submit `argv` (a whole bisection) as a batch job of its own, where the backend
        has a scheduler: (job id, its output file); elsewhere a UserError says so."""


class Cancelled(Exception):
    """The run was interrupted; the probe's outcome must not be recorded."""


class BackendLost(UserError):
    """The engine or cluster itself is gone: the session stops (exit 2) instead of
    turning every remaining probe into a skip."""


class ProbeFailed(Exception):
    """One probe could not run for a reason of its own (a container API error): a skip
    that is not cached."""


def in_batches(backend: "Backend", requests: Sequence[ProbeRequest], jobs: int,
               on_phase: PhaseCallback) -> Iterator[tuple[ProbeRequest, ProbeOutcome, float]]:
    """At most `jobs` probes at a time (--jobs), each outcome with the time its batch
    started: a round's first batch, the endpoints, included."""
    for start in range(0, len(requests), jobs):
        began = time.time()
        for req, outcome in backend.run_round(requests[start:start + jobs], on_phase):
            yield req, outcome, began
