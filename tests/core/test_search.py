"""Properties of the pure search against simulated linear histories."""
from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bisect_ngc.core.search import (Round, RepeatPolicy, Result, Status, Verdict, ceil_log,
                                    combine_runs, expected_probes, expected_rounds, next_step,
                                    next_in_subset, runs_settled, skip_limit)
from tests.lib.properties import examples


def simulate(n, t, skips, jobs=1, old=Verdict.PASS):
    """Run the search on a history whose first new-behaviour index is t."""
    new = Verdict.FAIL if old is Verdict.PASS else Verdict.PASS
    verdicts, probes, rounds = {}, 0, 0
    while True:
        step = next_step(n, verdicts, jobs)
        if isinstance(step, Result):
            return step, probes, rounds
        assert 0 < len(step.indices) <= max(jobs, 2)
        rounds += 1
        for i in step.indices:
            assert 0 <= i < n and i not in verdicts, "never probes a commit twice"
            probes += 1
            verdicts[i] = Verdict.SKIP if i in skips else new if i >= t else old


@st.composite
def histories(draw, max_n=100_000, with_skips=True):
    n = draw(st.integers(2, max_n))
    t = draw(st.integers(1, n - 1))
    skips: set[int] = set()
    if with_skips and n > 2:
        for _ in range(draw(st.integers(0, 4))):
            start = draw(st.integers(1, n - 2))
            length = draw(st.integers(1, 40))
            skips.update(range(start, min(start + length, n - 1)))
        skips.update(draw(st.sets(st.integers(1, n - 2), max_size=10)))
    return n, t, skips


@settings(max_examples=examples(300), deadline=None)
@given(histories(), st.integers(1, 16), st.sampled_from([Verdict.PASS, Verdict.FAIL]))
def test_finds_transition_unless_skips_touch_it(h, jobs, old):
    n, t, skips = h
    result, _, _ = simulate(n, t, skips, jobs, old)
    touching = (t - 1) in skips or t in skips
    if touching:
        assert result.status is Status.AMBIGUOUS
        assert t in result.candidates
        assert all(i in skips or i == result.candidates[-1] for i in result.candidates)
    else:
        assert result.status is Status.FOUND
        assert (result.last_old, result.first_new) == (t - 1, t)
    assert result.old_outcome is old and result.new_outcome is not old


@settings(max_examples=examples(300), deadline=None)
@given(histories(with_skips=False))
def test_serial_probe_bound_without_skips(h):
    n, t, _ = h
    result, probes, _ = simulate(n, t, set(), jobs=1)
    assert result.first_new == t
    assert probes <= ceil_log(n, 2) + 2
    assert probes <= expected_probes(n, 1)


@settings(max_examples=examples(300), deadline=None)
@given(histories(with_skips=False), st.integers(1, 16))
def test_round_bound_with_parallel_slots(h, jobs):
    n, t, _ = h
    result, probes, rounds = simulate(n, t, set(), jobs=jobs)
    assert result.first_new == t
    assert rounds <= expected_rounds(n, jobs) <= ceil_log(n, jobs + 1) + 1
    assert probes <= expected_probes(n, jobs)


def test_endpoints_come_first_and_both_at_once():
    assert next_step(50, {}, jobs=1) == Round((0, 49))
    assert next_step(50, {0: Verdict.PASS}, jobs=4) == Round((49,))


@pytest.mark.parametrize("old,new,words", [
    (Verdict.PASS, Verdict.PASS, "both endpoints pass"),
    (Verdict.FAIL, Verdict.FAIL, "both endpoints fail"),
    (Verdict.SKIP, Verdict.FAIL, "old endpoint could not be tested"),
    (Verdict.PASS, Verdict.SKIP, "new endpoint could not be tested"),
])
def test_invalid_endpoints_explained(old, new, words):
    result = next_step(10, {0: old, 9: new})
    assert result.status is Status.INVALID_ENDPOINTS
    assert words in result.explanation


def test_skip_moves_to_a_near_untested_commit():
    verdicts = {0: Verdict.PASS, 100: Verdict.FAIL, 50: Verdict.SKIP}
    (pick,) = next_step(101, verdicts).indices
    assert pick != 50 and abs(pick - 50) <= 12


def test_without_skips_the_probe_is_the_midpoint():
    assert next_step(101, {0: Verdict.PASS, 100: Verdict.FAIL}).indices == (50,)
    assert next_step(101, {0: Verdict.PASS, 100: Verdict.FAIL}, jobs=3).indices == (25, 50, 75)


def test_long_unbuildable_stretch_is_jumped_not_walked():
    stretch = set(range(40, 70))
    result, probes, _ = simulate(101, 80, stretch)
    assert result.first_new == 80
    # Walking it would cost 30 probes; jumping costs a few skipped ones.
    assert probes <= ceil_log(101, 2) + 2 + 5


def test_fix_search_is_the_same_search():
    fix, _, _ = simulate(300, 123, set(), old=Verdict.FAIL)
    regression, _, _ = simulate(300, 123, set(), old=Verdict.PASS)
    assert fix.first_new == regression.first_new == 123


def test_ambiguous_lists_every_candidate():
    result, _, _ = simulate(20, 10, {8, 9, 10})
    assert result.status is Status.AMBIGUOUS
    assert result.candidates == (8, 9, 10, 11)
    assert result.last_old == 7


RUNS = st.lists(st.sampled_from(list(Verdict)), min_size=1, max_size=7)


@given(RUNS)
def test_any_policy_fails_on_one_failure(runs):
    verdict = combine_runs(runs, RepeatPolicy.ANY)
    assert (verdict is Verdict.FAIL) == (Verdict.FAIL in runs)


@given(RUNS)
def test_majority_policy(runs):
    verdict = combine_runs(runs, RepeatPolicy.MAJORITY)
    fails, passes = runs.count(Verdict.FAIL), runs.count(Verdict.PASS)
    expected = Verdict.SKIP if fails == passes else Verdict.FAIL if fails > passes else Verdict.PASS
    assert verdict is expected


@given(RUNS, st.integers(1, 7), st.sampled_from(list(RepeatPolicy)))
def test_runs_settled_means_no_later_run_changes_the_answer(runs, total, policy):
    runs = runs[:total]
    if not runs_settled(runs, total, policy):
        return
    now = combine_runs(runs, policy) if len(runs) == total else None
    for rest in itertools.product(list(Verdict), repeat=total - len(runs)):
        full = combine_runs(list(runs) + list(rest), policy)
        now = now or full
        assert full is now


def test_ceil_log_is_exact_on_powers():
    assert [ceil_log(x, 2) for x in (1, 2, 3, 4, 5, 1024, 1025)] == [0, 1, 2, 2, 3, 10, 11]
    assert ceil_log(125, 5) == 3 and ceil_log(126, 5) == 4


# --- tiers: cheaper probes on a subset first ---------------------------------------------

def simulate_tiers(n, t, tiers, jobs=1, skips=frozenset()):
    """Cheapest tier first; each tier narrows as far as its own points allow, then the
    next; the last, the plain search, may probe anything. Returns the result and the
    probes each tier made."""
    verdicts, made = {}, [0] * (len(tiers) + 1)
    while True:
        for k, subset in enumerate(tiers):
            step = next_in_subset(n, verdicts, subset, jobs)
            if step is not None:
                assert set(step.indices) <= set(subset)
                break
        else:
            k, step = len(tiers), next_step(n, verdicts, jobs)
            if isinstance(step, Result):
                return step, made
        for i in step.indices:
            assert i not in verdicts, "never probes a commit twice"
            made[k] += 1
            verdicts[i] = Verdict.SKIP if i in skips else \
                Verdict.FAIL if i >= t else Verdict.PASS


@st.composite
def tiered(draw):
    n = draw(st.integers(2, 5000))
    t = draw(st.integers(1, n - 1))
    coarse = draw(st.sets(st.integers(0, n - 1), max_size=40))
    finer = coarse | draw(st.sets(st.integers(0, n - 1), max_size=200))
    return n, t, [sorted(coarse | {0, n - 1}), sorted(finer)]


@settings(max_examples=examples(300), deadline=None)
@given(tiered(), st.integers(1, 8))
def test_tiers_find_the_same_transition(case, jobs):
    n, t, tiers = case
    result, _ = simulate_tiers(n, t, tiers, jobs)
    assert result.status is Status.FOUND and result.first_new == t


@settings(max_examples=examples(300), deadline=None)
@given(tiered())
def test_the_last_tier_only_searches_between_adjacent_points_of_the_others(case):
    n, t, tiers = case
    _, made = simulate_tiers(n, t, tiers)
    points = sorted(set(tiers[0]) | set(tiers[1]))
    lo = max(p for p in points if p < t)
    hi = min(p for p in points if p >= t)
    assert made[-1] <= ceil_log(max(hi - lo, 1), 2)


def test_a_tier_without_the_endpoints_leaves_them_to_the_next():
    assert next_in_subset(100, {}, [5, 50]) is None
    assert next_in_subset(100, {}, [0, 50]) == Round((0,))
    assert next_in_subset(100, {0: Verdict.PASS, 99: Verdict.PASS}, [50]) is None


@given(tiered())
def test_skips_in_a_tier_never_change_the_answer_when_a_build_can_decide(case):
    n, t, tiers = case
    skipped = frozenset(i for i in tiers[1] if 0 < i < n - 1 and i % 3 == 0)
    result, _ = simulate_tiers(n, t, tiers, skips=skipped)
    if result.status is Status.FOUND:
        assert result.first_new == t
    else:
        assert result.status is Status.AMBIGUOUS and t in result.candidates


def simulate_cheap(n, t, skips, jobs, cheap_of):
    """Like simulate, with cheap_of(verdicts) naming the cheap indices before each round
    (in the engine: overlays of built neighbours). Returns (result, builds, cheap probes)."""
    verdicts, builds, cheap_probes = {}, 0, 0
    while True:
        cheap = cheap_of(verdicts)
        step = next_step(n, verdicts, jobs, cheap=cheap)
        if isinstance(step, Result):
            return step, builds, cheap_probes
        assert len(set(step.indices)) == len(step.indices)
        for i in step.indices:
            assert 0 <= i < n and i not in verdicts, "never probes a commit twice"
            if i in cheap:
                cheap_probes += 1
            else:
                builds += 1
            verdicts[i] = Verdict.SKIP if i in skips else Verdict.FAIL if i >= t else \
                Verdict.PASS


@settings(max_examples=examples(300), deadline=None)
@given(histories(max_n=5000), st.integers(1, 6), st.sets(st.integers(0, 4999), max_size=400),
       st.floats(0.001, 0.99))
def test_cheap_indices_change_the_cost_never_the_answer(h, jobs, marked, cost):
    n, t, skips = h
    plain, _, _ = simulate(n, t, skips, jobs)

    def near_probed(verdicts):    # cheap: a marked index next to a probed one, as overlays are
        return {i: cost for i in marked if i < n and i not in verdicts
                and any(j in verdicts for j in (i - 1, i + 1))}

    for cheap_of in (near_probed, lambda v: {i: cost for i in marked if i < n and i not in v}):
        result, _, _ = simulate_cheap(n, t, skips, jobs, cheap_of)
        # `skipped` lists the skips met on the way, which depends on the path taken.
        assert replace(result, skipped=()) == replace(plain, skipped=())


def test_cheap_neighbours_replace_builds_at_the_end():
    # Every index is cheap once a neighbour was probed (a Python-only stretch): the last
    # steps walk overlays instead of building.
    n, t = 1025, 700
    near = lambda v: {i: 1 / 30 for i in range(n) if i not in v and
                      any(j in v for j in (i - 1, i + 1, i - 2, i + 2))}
    plain, plain_probes, _ = simulate(n, t, set())
    result, builds, cheap = simulate_cheap(n, t, set(), 1, near)
    assert result == plain
    assert cheap > 0 and builds < plain_probes


@st.composite
def one_stretch(draw, max_n=5000):
    """A history with one stretch of L untestable commits, the change often next to it
    (the commit that broke the build is often the one that changed the behaviour)."""
    n = draw(st.integers(4, max_n))
    length = draw(st.integers(1, min(16, n - 2)))
    start = draw(st.integers(1, n - 1 - length))
    t = draw(st.one_of(st.sampled_from([start, start + length, min(start + length // 2, n - 1)]),
                       st.integers(1, n - 1)))
    return n, t, set(range(start, start + length))


@settings(max_examples=examples(400), deadline=None)
@given(one_stretch())
def test_a_skip_stretch_costs_its_length_and_no_more_than_two_extra_tests(h):
    """Where a skip lands, the next probe still halves what is left: the commits it tests
    are at most those of a skip-free search plus two, and the skipped ones at most the
    stretch's length (git bisect's count when its skip choice is not lucky)."""
    n, t, skips = h
    verdicts: dict[int, Verdict] = {}
    while not isinstance(step := next_step(n, verdicts), Result):
        for i in step.indices:
            verdicts[i] = Verdict.SKIP if i in skips else Verdict.FAIL if i >= t else Verdict.PASS
    tested = sum(1 for i, v in verdicts.items() if v is not Verdict.SKIP and 0 < i < n - 1)
    skipped = sum(1 for v in verdicts.values() if v is Verdict.SKIP)
    assert tested <= ceil_log(n - 1, 2) + 2
    assert skipped <= len(skips)


@settings(max_examples=examples(200), deadline=None)
@given(histories(max_n=3000), st.integers(1, 8), st.integers(1, 4))
def test_the_skip_limit_stops_only_an_unfinished_search_and_keeps_the_answer_inside(h, limit,
                                                                                    jobs):
    n, t, skips = h
    verdicts: dict[int, Verdict] = {}
    while True:
        step = next_step(n, verdicts, jobs)
        stop = skip_limit(n, verdicts, limit)
        if isinstance(step, Result):
            break
        if stop is not None:
            assert stop.status is Status.AMBIGUOUS and stop.stopped_early
            assert len(stop.skipped) > limit and t in stop.candidates
            assert stop.candidates == tuple(range(stop.last_old + 1, stop.candidates[-1] + 1))
            return
        for i in step.indices:
            verdicts[i] = Verdict.SKIP if i in skips else Verdict.FAIL if i >= t else Verdict.PASS
    assert sum(1 for i, v in verdicts.items() if v is Verdict.SKIP and 0 < i < n - 1) <= \
        limit + jobs


def test_no_skip_limit_never_stops():
    verdicts = {0: Verdict.PASS, 99: Verdict.FAIL, **{i: Verdict.SKIP for i in range(1, 60)}}
    assert skip_limit(100, verdicts, None) is None and skip_limit(100, verdicts, 0) is None
    assert skip_limit(100, verdicts, 58).skipped == tuple(range(1, 60))
