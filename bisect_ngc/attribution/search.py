"""Which part of the container made the difference: delta debugging over components.

Image A behaves one way and image B the other. A *swap* runs A with a set S of B's
components put in place (or B with A's). Delta debugging over the components that differ
finds a minimal set that turns A's behaviour into B's (binary search for the shortest
prefix, item by item: fewer swaps than Zeller's ddmin when components act together).

A skip is never a verdict. A swap that cannot run (an import or ABI error, another
Python, a test that matches neither image) is searched around: the binary search tries
the nearest other split, and where every split of a stretch skips, the answer is
"unresolved" with the components the culprit is among. When the swap of everything is a
skip, a minimal set of components that make swaps fail is found the same way and left
out, and the rest is searched.

No answer rests on the swaps that selected it. Before `found` is given, fresh swaps
(run until one side leads by `verify` runs) confirm it: A with B's set behaves like B, A with the
set less any one component behaves like A (a component whose removal does not flip the
outcome is dropped, and the smaller set confirmed), and B with A's set behaves like A.
"Not in these components" likewise rests on fresh swaps of everything, and is never
said while a differing component could not be swapped, or where B with all of A's
components behaves like A (the components act with something outside them).

Pure, like search.py: it takes the swap outcomes seen so far and returns the next swaps
to run, or the answer. The outcomes are replayed from the start on every call, so a
killed run resumes from its stored swaps and the answer does not depend on the order in
which they arrived.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable, Mapping, Sequence


# Up to this many differing components, "not in these components" also asks each one
# alone, so that one masked by another (the rule is not monotone) is not missed.
MASKING_CHECKS = 16


class Side(str, Enum):
    """Whose behaviour a swap showed."""

    A = "a"
    B = "b"
    SKIP = "skip"


@dataclass(frozen=True)
class Swap:
    into: str                       # "a": A with B's components; "b": B with A's
    components: frozenset[str]
    check: int = 0                  # 0: the search's swap; k > 0: its k-th fresh run

    @staticmethod
    def of(into: str, components, check: int = 0) -> "Swap":
        return Swap(into, frozenset(components), check)


@dataclass(frozen=True)
class Attribution:
    status: str     # found | unconfirmed | unresolved | not-in-components | none-differ
    culprits: tuple[str, ...] = ()
    unresolved: tuple[Swap, ...] = ()
    explanation: str = ""


class _Need(Exception):
    def __init__(self, swap: Swap):
        self.swap = swap


class Unknown(Exception):
    """Every split of a stretch was a skip: the needed item is among `among`."""

    def __init__(self, among: list[str]):
        self.among = among


def next_swaps(components: Sequence[str], seen: Mapping[Swap, Side], *, verify: int = 3,
               unswappable: Sequence[str] = (), suspects: Sequence[str] = ()
               ) -> list[Swap] | Attribution:
    """The next swap to run, or the answer. `verify`: fresh runs behind each confirmation
    (0: the search's own swaps confirm); `unswappable`: differing components no swap can
    put into A, which keep "not in these components" from being said; `suspects`: the
    components to try first (attribution.suspects): when B's suspects alone turn A, the
    culprits are sought among them, and that answer stands once confirmed by fresh swaps;
    else (or if it is not confirmed) the search is the one without suspects. Where one set
    of components makes the difference, suspects change the cost, not the answer; where
    several do, the answer is one of them either way, and then maybe another one."""
    names = sorted(set(components))
    if not names:
        if unswappable:
            return Attribution("unresolved", explanation=_cannot(unswappable))
        return Attribution("none-differ", explanation="the two images differ in no component "
                                                      "that was inventoried")

    def ask(swap: Swap) -> Side:
        if swap not in seen:
            raise _Need(swap)
        return seen[swap]

    try:
        return _attribute(names, ask, seen, verify, sorted(unswappable), suspects)
    except _Need as need:
        return [need.swap]


def _attribute(names: list[str], ask: Callable[[Swap], Side], seen: Mapping[Swap, Side],
               verify: int, unswappable: list[str], suspects: Sequence[str] = ()
               ) -> Attribution:
    everything = ask(Swap.of("a", names))
    left_out: list[str] = []
    while everything is Side.SKIP and names:
        # Some components cannot be put in (another Python, an ABI): find a minimal set
        # that makes a swap fail to run, leave it out, and try the rest.
        bad = minimal_set(names, lambda subset: ask(Swap.of("a", subset)) is Side.SKIP)
        left_out += bad
        names = [n for n in names if n not in bad]
        everything = ask(Swap.of("a", names)) if names else Side.SKIP
    outside = sorted(left_out + unswappable)
    if everything is Side.A and names and fresh(ask, Swap.of("a", names), verify) is Side.B:
        everything = Side.B       # its fresh runs overrule the one that said A
    if everything is not Side.B:
        return _not_in(names, ask, seen, verify, outside)
    led = [n for n in dict.fromkeys(suspects) if n in names]
    if 0 < len(led) < len(names) and ask(Swap.of("a", led)) is Side.B:
        answer = _narrow(led, ask, seen, verify, outside)
        if answer.status == "found":
            return answer
    return _narrow(names, ask, seen, verify, outside)


def _narrow(names: list[str], ask: Callable[[Swap], Side], seen: Mapping[Swap, Side],
            verify: int, outside: list[str]) -> Attribution:
    """A minimal set among `names` (B's all of them turn A), confirmed."""
    try:
        culprits = sorted(minimal_set(names, lambda subset: _turns(ask(Swap.of("a", subset)))))
    except Unknown as unknown:
        return Attribution("unresolved", unresolved=_skips(seen),
                           explanation=f"the swaps that would tell {', '.join(unknown.among)} "
                                       f"apart could not run: the culprit is among them")
    return _confirm(culprits, ask, seen, verify, outside)


def _not_in(names: list[str], ask: Callable[[Swap], Side], seen: Mapping[Swap, Side],
            verify: int, outside: list[str]) -> Attribution:
    """A with all of B's (swappable) components still behaves like A."""
    if not names:
        return Attribution("unresolved", unresolved=_skips(seen), explanation=_cannot(outside))
    again = fresh(ask, Swap.of("a", names), verify)
    if again is not Side.A:
        return Attribution("unresolved", unresolved=_skips(seen),
                           explanation=f"A with all {len(names)} swappable components of B "
                                       f"behaved like A, but {_unsettled(again)}")
    if outside:
        return Attribution("unresolved", unresolved=_skips(seen),
                           explanation=f"A with B's other {len(names)} differing component(s) "
                                       f"still behaves like A; {_cannot(outside)}")
    back = fresh(ask, Swap.of("b", names), verify, BACK)
    if back is Side.A or back is None:
        return Attribution("unresolved", unresolved=_skips(seen),
                           explanation="A with all of B's differing components behaves like "
                                       "A, yet B with all of A's " + (
                                           "behaves like A too: the components act together "
                                           "with something outside them" if back is Side.A
                                           else _unsettled(None)))
    if len(names) <= MASKING_CHECKS:
        unknown = []
        for name in names:
            alone = ask(Swap.of("a", [name]))
            if alone is Side.B:
                return Attribution("unresolved", unresolved=_skips(seen),
                                   explanation=f"A with B's {name} alone behaves like B, but "
                                               f"with all of B's components like A: they mask "
                                               f"each other (the rule is not monotone)")
            if alone is not Side.A:
                unknown.append(name)
        if unknown:       # a skip is neither side: it could be the one that masks
            return Attribution("unresolved", unresolved=_skips(seen),
                               explanation=f"A with all of B's components behaves like A, but "
                                           f"A with B's {', '.join(unknown)} alone could not "
                                           f"be told: one of them may be masked by the others")
    return Attribution("not-in-components", unresolved=_skips(seen),
                       explanation=f"A with all {len(names)} differing components of B "
                                   f"still behaves like A, and B with A's "
                                   f"{'like B' if back is Side.B else '(that swap cannot be made)'}"
                                   f": the difference is not in these components")


def _confirm(culprits: list[str], ask: Callable[[Swap], Side], seen: Mapping[Swap, Side],
             verify: int, outside: list[str]) -> Attribution:
    """Fresh swaps: the set flips A, removing any one of it does not, and B with A's
    versions of it behaves like A. A component that is not needed is dropped."""
    found = list(culprits)
    while True:
        whole = fresh(ask, Swap.of("a", found), verify)
        if whole is not Side.B:
            return Attribution("unresolved", unresolved=_skips(seen),
                               explanation=f"the search pointed at {', '.join(found)}, but "
                                           f"A with B's {'set' if len(found) > 1 else 'one'} "
                                           f"{_unsettled(whole)}")
        dropped = None
        for c in found if len(found) > 1 else ():
            without = fresh(ask, Swap.of("a", [x for x in found if x != c]), verify, WITHOUT)
            if without is Side.B:
                dropped = c
                break
            if without is not Side.A:
                return Attribution("unresolved", unresolved=_skips(seen),
                                   explanation=f"A with B's {', '.join(found)} behaves like B, "
                                               f"but whether {c} is needed is unknown: without "
                                               f"it A {_unsettled(without)}")
        if dropped is None:
            break
        found.remove(dropped)
    back = fresh(ask, Swap.of("b", found), verify, BACK)
    named = ", ".join(found)
    if back is Side.A:
        status, explanation = "found", (f"A with B's {named} behaves like B, and B with A's "
                                        f"behaves like A")
    else:
        status, explanation = "unconfirmed", (f"A with B's {named} behaves like B, but B with "
                                              f"A's {_unsettled(back)}")
    if outside:
        explanation += f" ({', '.join(outside)} could not be put into A and were left out)"
    return Attribution(status, tuple(found), _skips(seen), explanation)


# Fresh runs are numbered per role, so no run serves two checks: a set confirmed whole
# after a component was dropped from it gets runs that did not decide the drop.
WHOLE, WITHOUT, BACK = 0, 100, 200


def fresh(ask: Callable[[Swap], Side], swap: Swap, verify: int, role: int = WHOLE
          ) -> Side | None:
    """The side fresh runs of `swap` settle on: the first to lead the other by `verify`
    runs (a sequential test: a wrong side needs `verify` more wrong runs than right ones),
    within 4·verify tries. SKIP when too few runs could run to settle it; None when both
    sides came and neither led. With verify 0, the search's swap itself."""
    if verify <= 0:
        return ask(swap)
    counts = {Side.A: 0, Side.B: 0, Side.SKIP: 0}
    for k in range(1, 4 * verify + 1):
        counts[ask(Swap(swap.into, swap.components, role + k))] += 1
        for side, other in ((Side.A, Side.B), (Side.B, Side.A)):
            if counts[side] - counts[other] >= verify:
                return side
    return None if counts[Side.A] and counts[Side.B] else Side.SKIP


def _turns(side: Side) -> bool | None:
    return None if side is Side.SKIP else side is Side.B


def _unsettled(side: Side | None) -> str:
    return {Side.A: "behaved like A in fresh swaps (a flaky test, or components that only "
                    "act together with others)",
            Side.B: "still behaves like B in fresh swaps",
            Side.SKIP: "could not run in fresh swaps",
            None: "gave both behaviours in fresh swaps (a flaky test: raise --repeat)"}[side]


def _cannot(units: Sequence[str]) -> str:
    return (f"{', '.join(units)} could not be put into A (the swaps did not run, or no swap "
            f"can put them in): the difference may be there")


def _skips(seen: Mapping[Swap, Side]) -> tuple[Swap, ...]:
    return tuple(sorted((s for s, side in seen.items() if side is Side.SKIP),
                        key=lambda s: (s.into, len(s.components), sorted(s.components), s.check)))


def minimal_set(items: list[str], turns: Callable[[list[str]], bool | None]) -> list[str]:
    """A minimal subset of `items` for which `turns` holds, given that it holds for all
    of them and not for none. Each round finds, by binary search, the shortest prefix of
    the remaining items that turns it together with those found so far; its last item is
    needed. For k needed items that is about k·⌈log2 n⌉ + k swaps, where ddmin needs far
    more once the needed items must come together (benchmarks/attribution.py).
    `turns` may answer None (unknown): the search takes the nearest other split, then
    the stretch's splits from its other end, and raises Unknown when none is known. Minimal under a monotone
    `turns`: each found item was needed with all found before it and every item kept."""
    found: list[str] = []
    rest = list(items)
    while rest and not (found and turns(found) is True):
        lo, hi = 0, len(rest)         # found + rest[:hi] turns it; found + rest[:lo] does not
        turned_around = False
        while hi - lo > 1:
            mid, turned = _known_split(lo, hi, lambda m: turns(found + rest[:m]))
            if mid is None and not turned_around:
                rest[lo:hi] = rest[lo:hi][::-1]    # the same stretch, split from its other end
                turned_around = True
                continue
            if mid is None:
                raise Unknown(sorted(rest[lo:hi]))
            turned_around = False
            if turned:
                hi = mid
            else:
                lo = mid
        found.append(rest[hi - 1])
        rest = rest[:hi - 1]
    return found


def _known_split(lo: int, hi: int, turns: Callable[[int], bool | None]
                 ) -> tuple[int | None, bool]:
    """The split point nearest the middle of (lo, hi) whose outcome is known."""
    middle = (lo + hi) // 2
    for mid in sorted(range(lo + 1, hi), key=lambda m: (abs(m - middle), m)):
        turned = turns(mid)
        if turned is not None:
            return mid, turned
    return None, False
