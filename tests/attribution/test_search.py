"""Properties of the pure attribution search (ddmin over an image's components) against
simulated images: which components make A behave like B, and which swaps cannot run."""
from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from bisect_ngc.attribution.search import Attribution, Side, Swap, minimal_set, next_swaps
from tests.lib.properties import examples


def run(names, behaves_b, unloadable=frozenset(), order=None, verify=3, suspects=()):
    """Drive next_swaps to the end: `behaves_b(S)` says whether A with B's S behaves like
    B; B with A's S behaves like A when A's versions of S undo it; a swap that includes
    an unloadable component cannot run. Counts the search's swaps, not the fresh ones
    that confirm its answer."""
    seen: dict[Swap, Side] = {}
    probes = 0
    while True:
        step = next_swaps(names, seen, verify=verify, suspects=suspects)
        if isinstance(step, Attribution):
            return step, probes, seen
        for swap in step:
            probes += swap.check == 0
            if swap.components & unloadable:
                seen[swap] = Side.SKIP
            elif swap.into == "a":
                seen[swap] = Side.B if behaves_b(swap.components) else Side.A
            else:
                rest = frozenset(names) - swap.components
                seen[swap] = Side.B if behaves_b(rest) else Side.A


COMPONENTS = st.integers(1, 128).map(lambda n: [f"c{k:03d}" for k in range(n)])


@settings(max_examples=examples(300), deadline=None)
@given(COMPONENTS, st.data())
def test_one_culprit_is_named_within_two_log_n_plus_two_swaps(names, data):
    culprit = data.draw(st.sampled_from(names))
    answer, probes, _ = run(names, lambda s: culprit in s)
    assert answer.status == "found" and answer.culprits == (culprit,)
    assert probes <= 2 * math.ceil(math.log2(len(names))) + 2


@settings(max_examples=examples(200), deadline=None)
@given(COMPONENTS.filter(lambda n: len(n) >= 2), st.data())
def test_two_components_needed_together_are_both_named(names, data):
    pair = set(data.draw(st.lists(st.sampled_from(names), min_size=2, max_size=2, unique=True)))
    answer, _, _ = run(names, lambda s: pair <= s)
    assert answer.status == "found" and set(answer.culprits) == pair


@settings(max_examples=examples(200), deadline=None)
@given(COMPONENTS.filter(lambda n: len(n) >= 3), st.data())
def test_an_unloadable_swap_is_unresolved_and_the_answer_stays_right(names, data):
    culprit = data.draw(st.sampled_from(names))
    broken = data.draw(st.sets(st.sampled_from([n for n in names if n != culprit]),
                               min_size=1, max_size=3))
    answer, probes, seen = run(names, lambda s: culprit in s, unloadable=frozenset(broken))
    # The swaps that cannot run are found, left out, and the rest still names the culprit.
    assert answer.status == "found" and answer.culprits == (culprit,)
    assert all(s.components & broken for s in answer.unresolved)
    assert answer.unresolved and "could not be put into A" in answer.explanation
    bits = math.ceil(math.log2(len(names)))
    assert probes <= (len(broken) + 1) * (bits + 1) + 2 + len(broken)   # each left-out round: one more


@settings(max_examples=examples(200), deadline=None)
@given(COMPONENTS.filter(lambda n: len(n) >= 2), st.data())
def test_a_culprit_that_cannot_be_put_in_is_unresolved_never_a_wrong_name(names, data):
    culprit = data.draw(st.sampled_from(names))
    answer, _, _ = run(names, lambda s: culprit in s, unloadable=frozenset({culprit}))
    assert answer.status == "unresolved" and not answer.culprits
    assert culprit in answer.explanation


@settings(max_examples=examples(200), deadline=None)
@given(COMPONENTS, st.data())
def test_the_answer_is_one_minimal_whatever_the_interactions(names, data):
    """Any monotone rule (a union of required sets): the result turns A into B, and
    dropping any one of its components does not."""
    groups = data.draw(st.lists(st.sets(st.sampled_from(names), min_size=1, max_size=3),
                                min_size=1, max_size=3))
    behaves_b = lambda s: any(g <= s for g in groups)      # noqa: E731
    answer, _, _ = run(names, behaves_b)
    result = set(answer.culprits)
    assert behaves_b(result)
    assert all(not behaves_b(result - {x}) for x in result)


def test_a_difference_outside_the_components_names_none():
    """Something no inventory lists (a file outside the components) makes B: no swap
    moves either image."""
    names = [f"c{k}" for k in range(20)]
    seen: dict[Swap, Side] = {}
    probes = 0
    while not isinstance(answer := next_swaps(names, seen), Attribution):
        for swap in answer:
            probes += swap.check == 0
            seen[swap] = Side.A if swap.into == "a" else Side.B
    assert answer.status == "not-in-components" and not answer.culprits
    assert probes == 1 and len(seen) == 1 + 3 + 3  # everything, then 3 fresh runs each way
    assert "not in these components" in answer.explanation


def test_a_culprit_the_reverse_swap_does_not_undo_is_unconfirmed():
    names = ["numpy", "te", "nccl"]
    seen: dict[Swap, Side] = {}
    while not isinstance(step := next_swaps(names, seen), Attribution):
        for swap in step:     # A turns into B with te; B keeps its behaviour without it
            seen[swap] = Side.B if swap.into == "b" or "te" in swap.components else Side.A
    assert step.status == "unconfirmed" and step.culprits == ("te",)


def test_the_answer_does_not_depend_on_the_order_outcomes_arrived():
    names = [f"c{k}" for k in range(16)]
    _, _, seen = run(names, lambda s: "c11" in s)
    shuffled = dict(reversed(list(seen.items())))
    assert next_swaps(names, shuffled) == next_swaps(names, seen)


def test_no_components_is_its_own_answer():
    assert next_swaps([], {}).status == "none-differ"


def test_minimal_set_on_a_plain_list():
    assert sorted(minimal_set(list("abcdefgh"), lambda s: "c" in s and "f" in s)) == ["c", "f"]


@settings(max_examples=examples(200), deadline=None)
@given(COMPONENTS, st.integers(1, 3), st.data())
def test_k_needed_components_cost_about_k_log_n_swaps(names, k, data):
    need = set(data.draw(st.lists(st.sampled_from(names), min_size=min(k, len(names)),
                                  max_size=min(k, len(names)), unique=True)))
    answer, probes, _ = run(names, lambda s: need <= s)
    assert set(answer.culprits) == need
    assert probes <= len(need) * (math.ceil(math.log2(len(names))) + 1) + 2


@settings(max_examples=examples(200), deadline=None)
@given(COMPONENTS, st.integers(1, 3), st.data())
def test_suspects_change_the_cost_never_the_answer(names, k, data):
    """Where one set of components makes the difference, whatever the suspects (right,
    wrong, partly right), the same culprits are named;
    when they hold every culprit, the search costs what a search of the suspects alone
    costs, plus the one swap that tries them."""
    need = set(data.draw(st.lists(st.sampled_from(names), min_size=min(k, len(names)),
                                  max_size=min(k, len(names)), unique=True)))
    suspects = data.draw(st.lists(st.sampled_from(names), max_size=8, unique=True))
    answer, probes, _ = run(names, lambda s: need <= s, suspects=suspects)
    assert answer.status == "found" and set(answer.culprits) == need
    if need <= set(suspects):
        bound = len(need) * (math.ceil(math.log2(max(2, len(suspects)))) + 1) + 3
        assert probes <= bound


def test_a_culprit_among_few_suspects_of_many_components_takes_few_swaps():
    names = [f"c{k:03d}" for k in range(300)]
    plain = run(names, lambda s: "c123" in s)
    led = run(names, lambda s: "c123" in s, suspects=["c007", "c123", "c250"])
    assert plain[0].culprits == led[0].culprits == ("c123",)
    assert led[1] <= 5 < plain[1]


def test_a_flaky_swap_of_the_suspects_falls_back_to_the_whole_search():
    """The swap of the suspects alone said B once, wrongly: the search among them points at
    c0, fresh swaps refute it, and the whole search still finds c7 (it ended unresolved)."""
    names = [f"c{k}" for k in range(8)]

    def observe(swap: Swap) -> Side:
        if swap == Swap.of("a", ["c0"]):
            return Side.B
        present = swap.components if swap.into == "a" else frozenset(names) - swap.components
        return Side.B if "c7" in present else Side.A
    seen: dict[Swap, Side] = {}
    while not isinstance(step := next_swaps(names, seen, suspects=["c0"]), Attribution):
        seen.update((swap, observe(swap)) for swap in step)
    assert step.status == "found" and step.culprits == ("c7",), step


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(4, 12), st.integers(0, 2 ** 32), st.data())
def test_where_several_sets_make_the_difference_suspects_pick_one_that_does(n, seed, data):
    """Any monotone rule (B when A holds one of a few sets): with or without suspects the
    answer found is a set that turns A and none of whose members can go."""
    import random
    rng = random.Random(seed)
    names = [f"c{k:02d}" for k in range(n)]
    sets = [frozenset(rng.sample(names, rng.randint(1, 3))) for _ in range(rng.randint(1, 3))]

    def turns(s) -> bool:
        return any(x <= set(s) for x in sets)
    suspects = data.draw(st.lists(st.sampled_from(names), max_size=5, unique=True))
    answer, _, _ = run(names, turns, suspects=suspects)
    if answer.status == "found":
        found = set(answer.culprits)
        assert turns(found) and not any(turns(found - {c}) for c in found), (sets, answer)


# --- skips and flakes: never a verdict, never a wrong name (issue 30) -----------------

class World:
    """Images made of components: `rule(S)` says whether an image holding B's versions of
    S (and A's of the rest) behaves like B. `hidden` are differing components no swap can
    put in. Each swap's observation is drawn once, seeded: a skip with chance `skip`, else
    the wrong side with chance `flake`."""

    def __init__(self, names, rule, seed, skip=0.0, flake=0.0, hidden=frozenset(),
                 outside=frozenset()):
        import random
        self.names, self.rule, self.hidden = frozenset(names), rule, frozenset(hidden)
        self.outside = frozenset(outside)     # differs, but no inventory lists it
        self.rng, self.skip, self.flake = random.Random(seed), skip, flake

    def truth(self, swap: Swap) -> Side:
        present = swap.components if swap.into == "a" else \
            (self.names | self.hidden | self.outside) - swap.components
        return Side.B if self.rule(frozenset(present)) else Side.A

    def observe(self, swap: Swap) -> Side:
        r = self.rng.random()
        if r < self.skip:
            return Side.SKIP
        side = self.truth(swap)
        if r < self.skip + self.flake:
            return Side.A if side is Side.B else Side.B
        return side

    def attribute(self, verify=3):
        seen: dict[Swap, Side] = {}
        while not isinstance(step := next_swaps(sorted(self.names), seen, verify=verify,
                                                unswappable=sorted(self.hidden)), Attribution):
            for swap in step:
                seen[swap] = self.observe(swap)
        return step


def exact(world: World, answer: Attribution) -> bool:
    """What the answer claims holds for the images themselves."""
    a = lambda s: world.truth(Swap.of("a", s))        # noqa: E731
    named = frozenset(answer.culprits)
    if answer.status == "found":
        return (a(named) is Side.B and world.truth(Swap.of("b", named)) is Side.A and
                all(a(named - {c}) is Side.A for c in named))
    if answer.status == "not-in-components":
        return (not world.hidden and a(world.names) is Side.A and
                world.truth(Swap.of("b", world.names)) is Side.B and
                all(a({c}) is Side.A for c in world.names))
    return answer.status in ("unresolved", "unconfirmed")


def monotone_rule(names, data):
    groups = data.draw(st.lists(st.sets(st.sampled_from(names), min_size=1, max_size=3),
                                min_size=1, max_size=3))
    return lambda s: any(g <= s for g in groups)


NAMES = st.integers(1, 40).map(lambda n: [f"c{k:03d}" for k in range(n)])


@settings(max_examples=examples(300), deadline=None)
@given(NAMES, st.floats(0, 0.10), st.integers(0, 2**32), st.data())
def test_a_skipped_swap_never_names_a_component_that_does_nothing(names, rate, seed, data):
    world = World(names, monotone_rule(names, data), seed, skip=rate)
    answer = world.attribute()
    assert exact(world, answer), answer


@settings(max_examples=examples(300), deadline=None, derandomize=True)
@given(NAMES, st.floats(0, 0.10), st.floats(0, 0.10), st.integers(0, 2**32), st.data())
def test_flaky_and_skipped_swaps_never_name_a_component_whose_removal_does_not_flip(
        names, skip, flake, seed, data):
    """Wrong sides at up to 10%: each name is confirmed by 3 fresh swaps that must agree,
    so a wrong one needs three wrong observations in a row (derandomized: the same
    examples every run)."""
    world = World(names, monotone_rule(names, data), seed, skip=skip, flake=flake)
    answer = world.attribute()
    assert exact(world, answer), answer


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(1, 5), st.integers(0, 2**32), st.data())
def test_a_rule_that_is_not_monotone_is_unresolved_or_exact(n, seed, data):
    """Any rule at all over up to 5 components (a random truth table), with a component
    that no swap can put in, and skips."""
    names = [f"c{k}" for k in range(n)]
    hidden = frozenset(data.draw(st.sets(st.sampled_from(["h0", "h1"]), max_size=1)))
    outside = frozenset(data.draw(st.sets(st.just("o"), max_size=1)))   # not inventoried
    table = data.draw(st.lists(st.booleans(), min_size=2 ** (n + 1), max_size=2 ** (n + 1)))
    order = names + sorted(hidden) + sorted(outside)
    index = lambda s: sum(1 << order.index(x) for x in s)       # noqa: E731
    # The images as they are: A (nothing of B's) behaves like A, B (all of it) like B.
    rule = lambda s: s == frozenset(order) or bool(s) and table[index(s) % len(table)]  # noqa

    world = World(names, rule, seed, skip=data.draw(st.sampled_from([0.0, 0.05])),
                  hidden=hidden, outside=outside)
    answer = world.attribute()
    assert exact(world, answer), answer


def test_a_skip_counts_as_neither_side():
    """Finding 2 of issue 30: three components, only c000 matters, and the swap of
    {c000} alone cannot run. Read as "like A", it made the answer (c000, c001)."""
    names = ["c000", "c001", "c002"]
    seen: dict[Swap, Side] = {}
    while not isinstance(step := next_swaps(names, seen), Attribution):
        for swap in step:
            turned = "c000" in swap.components if swap.into == "a" else \
                "c000" not in swap.components
            seen[swap] = Side.SKIP if swap == Swap.of("a", ["c000"]) else \
                Side.B if turned else Side.A
    assert step.status == "found" and step.culprits == ("c000",), step


def test_a_masking_check_that_cannot_run_leaves_the_answer_unresolved():
    """c0 alone turns A into B, but c1 masks it, so A with both behaves like A. Read as
    "like A", a skipped swap of c0 alone made the answer "not in these components"
    (found by hypothesis: test_a_rule_that_is_not_monotone_is_unresolved_or_exact)."""
    names = ["c0", "c1"]
    seen: dict[Swap, Side] = {}
    while not isinstance(step := next_swaps(names, seen), Attribution):
        for swap in step:
            if swap == Swap.of("a", ["c0"]):
                seen[swap] = Side.SKIP
            elif swap.into == "a":
                seen[swap] = Side.B if swap.components == frozenset({"c0"}) else Side.A
            else:
                seen[swap] = Side.B
    assert step.status == "unresolved" and "c0" in step.explanation, step


def test_a_culprit_no_swap_can_put_in_is_unresolved_not_a_definite_no():
    """Finding 5 of issue 30: the culprit differs but cannot be swapped (another Python,
    absent from the donor): "not in these components" would be wrong."""
    world = World(["c0", "c1", "c2"], lambda s: "h0" in s, seed=1, hidden={"h0"})
    answer = world.attribute()
    assert answer.status == "unresolved" and "h0" in answer.explanation


def test_the_runs_that_drop_a_component_never_confirm_what_is_left():
    """C and F are needed together; the fresh runs of A with B's {F} that decide whether C
    is needed come out B (flaky). Confirming {F} must take runs of its own."""
    names = ["C", "F", "K"]
    seen: dict[Swap, Side] = {}
    while not isinstance(step := next_swaps(names, seen), Attribution):
        for swap in step:
            present = swap.components if swap.into == "a" else frozenset(names) - \
                swap.components
            flaky = swap.into == "a" and swap.components == {"F"} and 100 < swap.check < 200
            seen[swap] = Side.B if flaky or {"C", "F"} <= present else Side.A
    assert step.status != "found" or set(step.culprits) == {"C", "F"}, step


def test_a_component_masked_by_another_is_not_called_outside():
    """B's X alone turns A into B, B's Y hides it: "not in these components" would be
    wrong (the rule is not monotone)."""
    world = World(["X", "Y", "Z"], lambda s: ("X" in s and "Y" not in s) or "h" in s, seed=3,
                  outside={"h"})
    answer = world.attribute()
    assert answer.status == "unresolved" and "mask" in answer.explanation, answer


def test_an_unneeded_component_the_search_picked_is_dropped_by_the_fresh_swaps():
    """x flips A only without B's y: the search's swap of {x, y} said B by a flake; the
    fresh swaps drop what is not needed, or say unresolved."""
    names = ["x", "y", "z"]
    seen: dict[Swap, Side] = {Swap.of("a", ["x", "y"]): Side.B}
    while not isinstance(step := next_swaps(names, seen), Attribution):
        for swap in step:
            present = swap.components if swap.into == "a" else frozenset(names) - \
                swap.components
            seen[swap] = Side.B if "x" in present and "y" not in present or \
                present == frozenset(names) else Side.A
    assert step.status in ("found", "unresolved", "unconfirmed")
    assert step.status != "found" or step.culprits == ("x",) or "y" not in step.culprits


# --- what a swap can do (components.py, no engine) ----------------------------------

def test_swaps_that_cannot_be_made_say_why():
    from bisect_ngc.attribution.components import Component, cannot_swap
    added = Component("py:newpkg", None, "1.0")
    gone = Component("py:oldpkg", "1.0", None)
    lib = Component("lib:libnccl", "libnccl.so.2.21.5", "libnccl.so.2.23.4")
    assert cannot_swap(added, "a", "3.10", "3.10") == ""
    assert "not in the other image" in cannot_swap(gone, "a", "3.10", "3.10")
    assert "take them out" in cannot_swap(added, "b", "3.10", "3.10")
    assert "built for Python 3.12; this image runs 3.10" in cannot_swap(
        Component("py:te", "1.10", "2.6"), "a", "3.10", "3.12")
    assert cannot_swap(lib, "a", "3.10", "3.12") == ""       # a library knows no Python


def test_a_swap_directory_belongs_to_one_donor_image(tmp_path):
    """Two image pairs on one cache swap the same unit from two extractions: each swap
    links its own donor's files, never the first pair's."""
    from bisect_ngc.attribution.components import Component, layout, safe
    torch = Component("py:torch", "2.4", "2.5")
    dirs = []
    for donor in ("one", "two"):
        files = tmp_path / donor / safe("py:torch") / "torch"
        files.mkdir(parents=True)
        (files / "__init__.py").write_text(donor)
        lay = layout([torch], "a", tmp_path / donor, tmp_path / "swaps", "3.12", "3.12")
        assert (lay.directory / "site" / "torch" / "__init__.py").read_text() == donor
        dirs.append(lay.directory)
    assert dirs[0] != dirs[1]


def test_the_diff_names_what_changed_and_nothing_else():
    from bisect_ngc.attribution.components import diff
    dist = lambda v, d: {"name": "x", "version": v, "base": "/s", "files": [], "digest": d}  # noqa
    lib = lambda real, size: {"dir": "/l", "files": [], "real": real, "size": size}  # noqa
    a = {"dists": {"same": dist("1", "d"), "bumped": dist("1", "d1"), "gone": dist("1", "g")},
         "libs": {"libsame": lib("libsame.so.1", 10), "libnccl": lib("libnccl.so.2.21", 5)},
         "env": {"KEEP": "1", "CHANGED": "a", "1BAD": "x"}}
    b = {"dists": {"same": dist("1", "d"), "bumped": dist("2", "d2"), "new": dist("3", "n")},
         "libs": {"libsame": lib("libsame.so.1", 10), "libnccl": lib("libnccl.so.2.23", 6)},
         "env": {"KEEP": "1", "CHANGED": "b", "ADDED": "y"}}
    found = {c.unit: (c.in_a, c.in_b) for c in diff(a, b)}
    assert found == {"py:bumped": ("1", "2"), "py:gone": ("1", None), "py:new": (None, "3"),
                     "lib:libnccl": ("libnccl.so.2.21", "libnccl.so.2.23"),
                     "env:ADDED": (None, "y"), "env:CHANGED": ("a", "b")}



def test_the_swap_log_keeps_outcomes_per_attribution(tmp_path):
    """Swap outcomes live in SQLite, per attribution key, skip reasons and fresh runs
    included; another key (other images, test or runs per swap) sees none of them."""
    import json
    from bisect_ngc.attribution.swap_log import SwapLog
    log = SwapLog(tmp_path / "swaps.sqlite", "k")
    key = json.dumps(["a", ["py:x"]])
    log.put("plain:a", "pass")
    log.put(key, "skip", "no load")
    log.put(json.dumps(["a", ["py:x"], 2]), "b")
    assert SwapLog(tmp_path / "swaps.sqlite", "other").outcomes() == {}
    again = SwapLog(tmp_path / "swaps.sqlite", "k").outcomes()
    assert again[key] == ("skip", "no load") and len(again) == 3


def test_suspects_are_the_units_of_what_moved_and_nothing_of_its_neighbours():
    from bisect_ngc.attribution.suspects import suspects
    units = ["env:CUDNN_VERSION", "env:NCCL_NET_PLUGIN", "env:NCCL_VERSION", "lib:libcudnn",
             "lib:libcudnn_ops", "lib:libnccl", "lib:libnccl-net", "lib:libucm", "lib:libucc",
             "py:nvidia-nccl-cu12", "py:torch", "py:transformer-engine-cu12"]
    nccl = ["env:NCCL_VERSION", "lib:libnccl", "py:nvidia-nccl-cu12"]    # in the units' order
    assert suspects(units, {"nccl"}) == (nccl, [u for u in units if u not in nccl])
    assert suspects(units, {"ucx", "ucc"})[0] == ["lib:libucm", "lib:libucc"]
    assert suspects(units, {"cudnn", "nccl", "transformer_engine"}, "hang")[0][:3] == nccl
    assert suspects(units, {"cudnn", "nccl"}, "numerics")[0][:3] == \
        ["env:CUDNN_VERSION", "lib:libcudnn", "lib:libcudnn_ops"]
    assert suspects(units, {"transformer_engine"})[0] == ["py:transformer-engine-cu12"]
    assert suspects(units, set()) == ([], units)
