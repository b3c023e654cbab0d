"""What a bisection is run with: the range, prebuilt tiers, settings and progress hooks,
the release-mode helpers the engine calls (overlays, image swaps), and the two ways a
probe can stop it (an interruption, a crashed test)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from .probes import Backend, ProbeRequest, Source
from .recipes import Recipe
from .verdicts import ProbeOutcome
from ..errors import UserError
from ..vcs.history import History
from .records import ProbeRecord, SessionRecord
from .search import RepeatPolicy, Result, Round, Verdict
from .belief import DEFAULT_CONFIDENCE
from .verification import DEFAULT_VERIFY


class Overlays(Protocol):
    """Overlay probes: a built neighbour's wheel with a commit's Python files put in
    (prebuilt/wheel_overlay.py)."""

    def cheap(self, lo: int, hi: int, verdicts: Mapping[int, Verdict]) -> dict[int, float]:
        """The commits in (lo, hi) that an overlay can probe, by their cost."""

    def source(self, target: int, lo: int, hi: int) -> Source | None:
        """How to probe `target` as an overlay, if a built neighbour allows it."""

    def make(self, target: int, src: Source) -> bool:
        """Write the overlay's wheel into the store; False where it cannot be made."""


class ImageSwaps(Protocol):
    """Swap probes between two release images (attribution/swap_probes.py)."""

    def carries(self, a: str, b: str) -> bool | None:
        """Whether image a with b's PyTorch behaves as b; None where it could not tell."""

    def attribute(self, a: str, b: str) -> dict[str, Any]:
        """Which component makes a and b differ."""


class ImageRule(Protocol):
    """Release mode's rule for NGC images among builds (images/image_evidence.py)."""

    def note(self, rec: ProbeRecord, verdicts: dict[int, Verdict]) -> None:
        """Put a probe's verdict where the search reads it, or keep it aside."""

    def follow(self, verdicts: dict[int, Verdict], image: str | None
               ) -> tuple[Recipe, Backend, Overlays | None] | None:
        """The recipe, backend and overlays that builds move to, once, if they move."""

    def before_builds(self, verdicts: dict[int, Verdict], recipe: Recipe
                      ) -> Round | Result | None:
        """What must be probed, or the answer, before builds take over from images."""

    def components(self) -> dict[str, Any] | None:
        """Which component makes the two images last compared differ."""


class Interrupted(KeyboardInterrupt):
    """A probe ended by an interruption (Ctrl-C reached its container or process first):
    nothing is recorded for it, and the run stops as if interrupted itself."""


def stop_if_needed(req: ProbeRequest, outcome: ProbeOutcome) -> None:
    """Before a probe is recorded: an interrupted one stops the run, and so does a test that
    exited 128 or above or died of a signal (not --timeout's), as in `git bisect run`: a
    crash or a kill says nothing about the behaviour, and a silent skip could leave a found
    answer that rests on it unseen. Nothing is recorded, so the same command runs that
    probe again."""
    if outcome.transient:
        raise Interrupted(f"the probe of {req.commit[:12]} was interrupted")
    if outcome.crashed is not None:
        how = f"was killed by signal {-outcome.crashed}" if outcome.crashed < 0 else \
            f"exited {outcome.crashed}"
        raise UserError(
            f"the test {how} at {req.commit[:12]}: an exit code of 128 or above, or a "
            "signal, stops the bisection, as in `git bisect run` (a crash is no verdict)",
            hint=f"see the log in {req.log_dir}; fix the test, or make it exit 125 to skip "
                 "such a commit or 1 to count it as the new behaviour; then run the same "
                 "command again to resume")


@dataclass
class Range:
    """What is being bisected: a repository and a first-parent candidate list."""

    history: History
    old: str
    new: str
    candidates: list[str]
    repo_id: str
    labels: dict[str, Any]     # how the user named the endpoints (release, image, rev)


@dataclass
class Tier:
    """Prebuilt artifacts of one kind, by candidate index."""

    name: str                       # "image" | "nightly"
    sources: dict[int, Source]


class Events:
    """Progress hooks; the CLI's displays override what they show."""

    def session(self, record: SessionRecord, resumed: int) -> None: ...
    def round(self, number: int, indices: tuple[int, ...], lo: int, hi: int,
              tier: str = "build") -> None: ...
    def phase(self, req: ProbeRequest, phase: str) -> None: ...
    def probe(self, rec: ProbeRecord) -> None: ...
    def close(self) -> None: ...


# Past this many untestable commits a bisection stops and says so: a person would rather
# hear early that the test does not run there than wait for every commit of the stretch.
DEFAULT_MAX_SKIPS = 32


@dataclass
class Settings:
    jobs: int = 1
    repeat: int = 1
    policy: RepeatPolicy = RepeatPolicy.ANY
    retry_skips: bool = False          # ignore cached skips (their cause may be fixed)
    max_skips: int | None = DEFAULT_MAX_SKIPS   # stop as ambiguous past this many; None: never
    verify: int = DEFAULT_VERIFY       # fresh probes of each side of the answer (rerun.py)
    confidence: float = DEFAULT_CONFIDENCE  # the belief an answer needs (belief_judge.py)
    premises: int = 1                  # fresh runs of each side of a belief's answer
    probe_argv: list[str] = field(default_factory=list)
