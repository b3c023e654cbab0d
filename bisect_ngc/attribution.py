"""Which part of the container made the difference: delta debugging over components.

Image A behaves one way and image B the other. A *swap* runs A with a set S of B's
components put in place (or B with A's). Zeller's ddmin over the components that differ
finds a 1-minimal set that turns A's behaviour into B's; the reverse swap (B with A's
versions of that set) confirms it. A swap that cannot run (an import or ABI error,
another Python) is unresolved: it counts as "not B", and is listed.

Pure, like search.py: it takes the swap outcomes seen so far and returns the next swaps
to run, or the answer. The outcomes are replayed from the start on every call, so a
killed run resumes from its stored swaps and the answer does not depend on the order in
which they arrived.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable, Mapping, Sequence


class Side(str, Enum):
    """Whose behaviour a swap showed."""

    A = "a"
    B = "b"
    SKIP = "skip"


@dataclass(frozen=True)
class Swap:
    into: str                       # "a": A with B's components; "b": B with A's
    components: frozenset[str]

    @staticmethod
    def of(into: str, components) -> "Swap":
        return Swap(into, frozenset(components))


@dataclass(frozen=True)
class Attribution:
    status: str                     # found | unconfirmed | not-in-components | none-differ
    culprits: tuple[str, ...] = ()
    unresolved: tuple[Swap, ...] = ()
    explanation: str = ""


class _Need(Exception):
    def __init__(self, swap: Swap):
        self.swap = swap


def next_swaps(components: Sequence[str], seen: Mapping[Swap, Side]) -> list[Swap] | Attribution:
    """The next swap to run, or the answer."""
    names = sorted(set(components))
    if not names:
        return Attribution("none-differ", explanation="the two images differ in no component "
                                                      "that was inventoried")

    def ask(swap: Swap) -> Side:
        if swap not in seen:
            raise _Need(swap)
        return seen[swap]

    try:
        return _attribute(names, ask, seen)
    except _Need as need:
        return [need.swap]


def _attribute(names: list[str], ask: Callable[[Swap], Side],
               seen: Mapping[Swap, Side]) -> Attribution:
    everything = ask(Swap.of("a", names))
    if everything is not Side.B:
        why = ("could not run" if everything is Side.SKIP else "still behaves like A")
        return Attribution("not-in-components", unresolved=_skips(seen),
                           explanation=f"A with all {len(names)} differing components of B "
                                       f"{why}: the difference is not in these components")
    culprits = ddmin(names, lambda subset: ask(Swap.of("a", subset)) is Side.B)
    back = ask(Swap.of("b", culprits))
    status = "found" if back is Side.A else "unconfirmed"
    explanation = (f"A with B's {', '.join(culprits)} behaves like B, and B with A's behaves "
                   f"like A" if status == "found" else
                   f"A with B's {', '.join(culprits)} behaves like B, but B with A's "
                   f"{'could not run' if back is Side.SKIP else 'still behaves like B'}")
    return Attribution(status, tuple(culprits), _skips(seen), explanation)


def _skips(seen: Mapping[Swap, Side]) -> tuple[Swap, ...]:
    return tuple(sorted((s for s, side in seen.items() if side is Side.SKIP),
                        key=lambda s: (s.into, len(s.components), sorted(s.components))))


def ddmin(items: list[str], turns: Callable[[list[str]], bool]) -> list[str]:
    """A 1-minimal subset of `items` for which `turns` holds, given that it holds for
    `items` (Zeller and Hildebrandt, 2002): try each of n parts, then each complement,
    then split finer."""
    n = 2
    while len(items) >= 2:
        parts = _split(items, n)
        part = next((p for p in parts if turns(p)), None)
        if part is not None:
            items, n = part, 2
            continue
        rest = next((c for c in (_without(items, p) for p in parts) if turns(c)), None) \
            if n > 2 else None
        if rest is not None:
            items, n = rest, max(n - 1, 2)
            continue
        if n >= len(items):
            break
        n = min(2 * n, len(items))
    return items


def _split(items: list[str], n: int) -> list[list[str]]:
    size, extra = divmod(len(items), n)
    parts, start = [], 0
    for k in range(n):
        end = start + size + (1 if k < extra else 0)
        parts.append(items[start:end])
        start = end
    return parts


def _without(items: list[str], part: list[str]) -> list[str]:
    drop = set(part)
    return [x for x in items if x not in drop]
