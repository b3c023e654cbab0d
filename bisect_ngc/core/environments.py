"""Where a probe's test ran: a base image (or the host) plus ordered layers.

A verdict belongs to its environment. Two verdicts may be compared only when their
environments differ in the thing being bisected alone: a release image as it is and a
wheel built from source and installed in another image are not two points of one
bisection. The engine records each probe's Environment; `comparable` says whether two may
be paired.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from .search import Result, Status

HOST = "host"


@dataclass(frozen=True)
class Layer:
    kind: str           # wheel | files | env
    what: str           # the wheel's tier (build, nightly, overlay, prebuilt), "companion",
                        # a component, NAME
    source: str = ""    # where it comes from: a store key or URL, an image, a value


@dataclass(frozen=True)
class Environment:
    base: str                       # an image reference, or HOST
    layers: tuple[Layer, ...] = ()

    @property
    def as_is(self) -> bool:
        """An image as it ships: nothing put in."""
        return not self.layers

    def comparable(self, other: "Environment") -> bool:
        """The same base and the same kinds of layer: what differs is the probed commit."""
        return self.base == other.base and \
            [(la.kind, la.what in ("build", "nightly", "overlay", "prebuilt")) for la in self.layers] == \
            [(la.kind, la.what in ("build", "nightly", "overlay", "prebuilt")) for la in other.layers]

    def show(self, built: bool = True) -> str:
        """In words; `built`: whether a build command made the commit's build (without
        one, a probe tests the commit's worktree as it is)."""
        where = "on this host" if self.base == HOST else f"in `{self.base}`"
        if self.as_is:
            return f"the image `{self.base}` as it is" if self.base != HOST else \
                "this host as it is"
        parts = [f"companion {la.source}" if la.what == "companion" else
                 ("the commit's build" if built else "the commit's worktree (no build)")
                 if la.what == "build" else
                 f"a {la.what} wheel" if la.kind == "wheel" else f"{la.kind} {la.what}"
                 for la in self.layers]
        return f"{', '.join(parts)} {where}"

    def as_dict(self) -> dict[str, Any]:
        return {"base": self.base, "layers": [la.__dict__ for la in self.layers]}

    @staticmethod
    def from_dict(data: dict[str, Any] | None) -> "Environment | None":
        if not data:
            return None
        return Environment(data["base"], tuple(Layer(**la) for la in data.get("layers", [])))


def of_probe(tier: str, source_ref: str, base_image: str | None,
             companions: Sequence[str] = ()) -> Environment:
    """The environment a probe of this tier runs in: an image as it is, or the base image
    (the host without one) with one wheel of the probed commit installed; then the user's
    companions (`--with`), the same on every probe."""
    extra = tuple(Layer("wheel", "companion", label) for label in companions)
    if tier == "image":
        return Environment(source_ref, extra)
    return Environment(base_image or HOST, (Layer("wheel", tier, source_ref), *extra))


def unpaired(old: Environment, new: Environment) -> str:
    """Why two verdicts cannot be the two sides of an answer, or ""."""
    if old.comparable(new):
        return ""
    return (f"the last old-behaviour verdict comes from {old.show()} and the first "
            f"new-behaviour one from {new.show()}: they differ in more than the commit, so "
            f"neither names the change")


def paired(found: Result, environments: Mapping[int, "Environment"]) -> Result:
    """`found` only when its two verdicts come from comparable environments; else the
    range between them, ambiguous, saying why."""
    if found.status is not Status.FOUND or found.last_old is None or found.first_new is None:
        return found
    old, new = environments.get(found.last_old), environments.get(found.first_new)
    if old is None or new is None or not unpaired(old, new):
        return found
    ends = [old, new]
    return replace(found, status=Status.AMBIGUOUS, first_new=None,
                   candidates=tuple(range(found.last_old + 1, found.first_new + 1)),
                   explanation=unpaired(*ends))
