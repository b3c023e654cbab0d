"""What an answer was, and whether it was right: one Outcome per case and per tool, and
the rule that grades it against the planted truth."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Outcome:
    """One answer to one case. `grade`: right (a right `found`), wrong (a `found` that is
    not), honest (a non-answer that is right: "no change" where nothing changed, or the
    candidates that hold the truth where no commit alone can be named), miss (any other
    non-answer)."""

    family: str
    cell: str
    seed: int
    who: str                          # "bisect-ngc", "bisect-ngc (in-process)", "git bisect run"
    status: str                       # found, ambiguous, invalid-endpoints, exit-3, ...
    named: str | None = None
    grade: str = ""
    runs: int | None = None
    builds: int | None = None
    confidence: float | None = None   # as the tool states it; None: it states none
    reproduce: str = ""               # the command that runs this case alone
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def grade(status: str, named: str | None, candidates: list[str], *, planted: str | None,
          nameable: bool, also_right: frozenset[str] = frozenset()) -> str:
    """right / wrong / honest / miss, for a pass/fail answer against the planted truth:
    `planted` the commit that made the change (None: nothing changed); `nameable` whether
    one commit alone can be named (not where untestable commits surround it)."""
    if status == "found":
        return "right" if nameable and named in ({planted} | also_right) - {None} else "wrong"
    if planted is None:
        return "honest" if status in ("invalid-endpoints", "no-change") else "miss"
    if not nameable and planted in candidates:
        return "honest"
    return "miss"
