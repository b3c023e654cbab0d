"""What the state holds, as values: probes, sessions and their answers, Slurm's jobs."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

from .search import Status, Verdict


@dataclass
class ProbeRecord:
    round: int
    idx: int
    commit: str
    verdict: Verdict
    reason: str = ""
    exit_code: int | None = None
    build_s: float | None = None
    test_s: float | None = None
    runs: list[str] = field(default_factory=list)
    cached: bool = False
    started: float | None = None
    ended: float | None = None
    logs: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


# A session's status: the search's answers, and the two states of one not answered yet.
class SessionStatus(str, Enum):
    RUNNING = "running"
    INTERRUPTED = "interrupted"
    FOUND = Status.FOUND.value
    AMBIGUOUS = Status.AMBIGUOUS.value
    INVALID_ENDPOINTS = Status.INVALID_ENDPOINTS.value
    NOT_IN_COMMITS = Status.NOT_IN_COMMITS.value


def finished(status: SessionStatus) -> bool:
    return status.value in {s.value for s in Status}


def from_dict(cls, data: dict[str, Any] | None):
    """A dataclass from stored JSON, ignoring keys that later versions dropped."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in (data or {}).items() if k in names})


@dataclass
class SessionParams:
    """What was asked, and what the report needs to tell it without the repository."""

    key: str = ""
    identity: dict[str, str] = field(default_factory=dict)
    jobs: int = 1
    repeat: int = 1
    policy: str = "any"
    backend: dict[str, Any] = field(default_factory=dict)     # Backend.describe()
    recipe: dict[str, Any] = field(default_factory=dict)      # Recipe.show()
    labels: dict[str, Any] = field(default_factory=dict)      # how the endpoints were named
    origin: str = ""                                          # for links; no credentials
    subject: str = "The failure"                              # the headline's subject
    probe_argv: list[str] = field(default_factory=list)       # re-checks one commit


@dataclass
class SessionResult:
    """The answer, as the engine found it (shas, not indices)."""

    status: str
    first_new: str | None = None
    last_old: str | None = None
    candidates: list[str] = field(default_factory=list)
    old_outcome: str | None = None
    new_outcome: str | None = None
    skipped: list[str] = field(default_factory=list)
    explanation: str = ""
    n_candidates: int = 0          # commits after the old endpoint on the path
    endpoint_reasons: dict[str, str] = field(default_factory=dict)
    ships: list[dict[str, str]] = field(default_factory=list)  # catalog releases with it
    components: dict[str, Any] | None = None   # which part of the container, when not torch
    metric: dict[str, Any] | None = None       # --metric: the samples' summary and effects
    confidence: float | None = None            # P(the answer) under the belief, where stated
    belief: dict[str, Any] | None = None       # the belief behind it (belief_judge.summary)
    descents: list[dict[str, Any]] | None = None  # merges looked into (question/merges.py)


@dataclass
class SessionRecord:
    id: str
    created: float
    updated: float
    status: SessionStatus
    params: SessionParams
    candidates: list[str]
    result: SessionResult | None


@dataclass
class SlurmJob:
    """One probe's Slurm array tasks, stored the moment sbatch returns, so a re-run
    re-attaches instead of submitting again."""

    key: str                       # the probe's key: commit#run
    round: str                     # the round directory's name
    task: int                      # index in the round's arrays
    build_job: str | None = None
    test_job: str | None = None
    attempt: int = 0
    expect: str = ""
    submitted: float = 0.0
    cancelled_by_us: bool = False


def verification_cost(checks: list[ProbeRecord]) -> dict[str, Any]:
    """What running the answer's pair again cost: probes, test runs and test seconds."""
    return {"probes": len(checks), "runs": sum(len(p.runs) for p in checks),
            "test_s": round(sum(p.test_s or 0.0 for p in checks), 3),
            "verdicts": [{"commit": p.commit, "verdict": p.verdict.value} for p in checks]}


def tally(probes: list[ProbeRecord]) -> dict[str, int]:
    """probes: commits probed in this session (built, prebuilt or overlaid) and tested;
    builds: probes that compiled (reused builds left out); runs: test executions (none
    where the build failed or the checkout did); cached: verdicts taken from the cache; rounds: search
    steps; prebuilt: probes of a prebuilt tier or an overlay; overlays: probes of an
    overlay."""
    ran = [p for p in probes if not p.cached]
    return {"probes": len({(p.round, p.idx) for p in ran}),
            "builds": sum(1 for p in ran if p.build_s is not None
                          and not p.details.get("build_reused")),
            "runs": sum(len(p.runs) for p in probes if not p.cached),
            "cached": sum(1 for p in probes if p.cached),
            "rounds": len({p.round for p in probes}),
            "prebuilt": sum(1 for p in probes if p.details.get("tier", "build") != "build"),
            "overlays": sum(1 for p in ran if p.details.get("tier") == "overlay")}
