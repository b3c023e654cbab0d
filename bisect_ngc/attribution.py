"""Which part of the container made the difference: delta debugging over components.

Image A behaves one way and image B the other. A *swap* runs A with a set S of B's
components put in place (or B with A's). Delta debugging over the components that differ
finds a minimal set that turns A's behaviour into B's (binary search for the shortest
prefix, item by item: fewer swaps than Zeller's ddmin when components act together); the
reverse swap (B with A's versions of that set) confirms it. A swap that cannot run (an
import or ABI error, another Python) is a skip, listed with the others: when the swap of
everything is one, a minimal set of components that make swaps fail is found the same way
and left out, and the rest is searched; a culprit among those left out is "unresolved",
never a wrong name.

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
    status: str     # found | unconfirmed | unresolved | not-in-components | none-differ
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
    left_out: list[str] = []
    while everything is Side.SKIP and names:
        # Some components cannot be put in (another Python, an ABI): find a minimal set
        # that makes a swap fail to run, leave it out, and try the rest.
        bad = minimal_set(names, lambda subset: ask(Swap.of("a", subset)) is Side.SKIP)
        left_out += bad
        names = [n for n in names if n not in bad]
        everything = ask(Swap.of("a", names)) if names else Side.SKIP
    if everything is not Side.B:
        if left_out:
            return Attribution(
                "unresolved", unresolved=_skips(seen),
                explanation=f"{', '.join(sorted(left_out))} of B could not be put into A (the "
                            f"swaps did not run), and A with B's other {len(names)} "
                            f"differing component(s) still behaves like A: the difference may "
                            f"be in those left out")
        return Attribution("not-in-components", unresolved=_skips(seen),
                           explanation=f"A with all {len(names)} differing components of B "
                                       f"still behaves like A: the difference is not in these "
                                       f"components")
    culprits = sorted(minimal_set(names, lambda subset: ask(Swap.of("a", subset)) is Side.B))
    back = ask(Swap.of("b", culprits))
    status = "found" if back is Side.A else "unconfirmed"
    explanation = (f"A with B's {', '.join(culprits)} behaves like B, and B with A's behaves "
                   f"like A" if status == "found" else
                   f"A with B's {', '.join(culprits)} behaves like B, but B with A's "
                   f"{'could not run' if back is Side.SKIP else 'still behaves like B'}")
    if left_out:
        explanation += (f" ({', '.join(sorted(left_out))} could not be put into A and were "
                        f"left out)")
    return Attribution(status, tuple(culprits), _skips(seen), explanation)


def _skips(seen: Mapping[Swap, Side]) -> tuple[Swap, ...]:
    return tuple(sorted((s for s, side in seen.items() if side is Side.SKIP),
                        key=lambda s: (s.into, len(s.components), sorted(s.components))))


def minimal_set(items: list[str], turns: Callable[[list[str]], bool]) -> list[str]:
    """A minimal subset of `items` for which `turns` holds, given that it holds for all
    of them and not for none. Each round finds, by binary search, the shortest prefix of
    the remaining items that turns it together with those found so far; its last item is
    needed. For k needed items that is about k·⌈log2 n⌉ + k swaps, where ddmin needs far
    more once the needed items must come together (benchmarks/attribution.py).
    Minimal under a monotone `turns`: each found item was needed with all found before it
    and every item kept after it."""
    found: list[str] = []
    rest = list(items)
    while rest and not (found and turns(found)):
        lo, hi = 0, len(rest)         # found + rest[:hi] turns it; found + rest[:lo] does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if turns(found + rest[:mid]):
                hi = mid
            else:
                lo = mid
        found.append(rest[hi - 1])
        rest = rest[:hi - 1]
    return found
