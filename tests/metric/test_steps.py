"""The step check (metric/steps.py): commits as units, each build with its own speed."""
from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, strategies as st

from bisect_ngc.core.search import Verdict
from bisect_ngc.metric import steps
from bisect_ngc.metric.comparator import Rule
from tests.lib.metric_sim import bisect_once, lognormal

units = st.lists(st.tuples(st.floats(-1, 1), st.floats(0, 0.01)), min_size=0, max_size=6)


@given(st.lists(units, min_size=1, max_size=3))
def test_the_bound_on_the_spread_is_never_negative_and_needs_two_commits_a_side(sides):
    tau2 = steps.between(sides)
    if all(len(s) < 2 for s in sides):
        assert tau2 is None
    else:
        assert tau2 is not None and tau2 >= 0


@given(st.floats(-1, 1), st.integers(2, 6), st.floats(0, 0.01))
def test_commits_at_one_level_bound_the_spread_at_zero(level, k, error):
    assert steps.between([[(level, error)] * k]) <= 1e-12


def test_a_wider_spread_between_commits_gives_a_higher_bound():
    narrow = [(0.0, 1e-6), (0.001, 1e-6), (-0.001, 1e-6)]
    wide = [(0.0, 1e-6), (0.01, 1e-6), (-0.01, 1e-6)]
    assert steps.between([wide]) > steps.between([narrow]) > 0


def _samples(levels: dict[int, float], runs: int = 6, noise: float = 0.001,
             seed: int = 0) -> dict[int, list[tuple[int, float]]]:
    rng = random.Random(seed)
    return {i: [(1 + r, math.exp(lv + rng.gauss(0, noise))) for r in range(runs)]
            for i, lv in levels.items()}


def _verdicts(samples, first_new: int) -> dict[int, Verdict]:
    return {i: Verdict.PASS if i < first_new else Verdict.FAIL for i in samples}


def test_a_clean_step_between_two_levels_stands():
    levels = {0: 0.0, 3: 0.001, 4: -0.001, 5: 0.0, 6: 0.05, 7: 0.051, 8: 0.049, 15: 0.05}
    s = _samples(levels)
    assert steps.spread(5, 6, s, _verdicts(s, 6), Rule()) is None


def test_a_build_as_fast_as_the_other_side_is_a_spread_not_a_step():
    """Issue 52, finding 1: commit 7 (old, +2.5% of its own) read as new, and 6 (+1.1%)
    against 5 (-1.7%) then "differed": no step stands out from builds that spread so."""
    levels = {0: 0.0, 3: -0.012, 4: 0.009, 5: -0.017, 6: 0.011, 7: 0.025, 8: 0.03, 10: 0.03,
              15: 0.03}
    s = _samples(levels, runs=8)
    doubt = steps.spread(5, 6, s, _verdicts(s, 6), Rule())
    assert doubt is not None
    assert "a spread, not a step" in doubt.why and "#6" in doubt.why


def test_a_neighbour_not_yet_measured_is_asked_for():
    levels = {0: 0.0, 3: 0.0, 4: 0.0, 5: 0.0, 6: 0.05, 15: 0.05}
    s = _samples(levels)
    doubt = steps.spread(5, 6, s, _verdicts(s, 6), Rule())
    assert doubt is not None and doubt.runs == (7,)


def test_an_untestable_neighbour_is_stepped_over():
    levels = {0: 0.0, 3: 0.0, 4: 0.0, 5: 0.0, 6: 0.05, 8: 0.05, 9: 0.05, 15: 0.05}
    s = _samples(levels)
    v = {**_verdicts(s, 6), 7: Verdict.SKIP}
    assert steps.spread(5, 6, s, v, Rule()) is None


# Seeds of the reproducer (32 commits, +3% at a random commit, 1% run noise, each
# interior build exp(N(0, 1%)) of its own) where the plain search names a wrong commit.
WRONG_SEEDS = (3, 8, 12)


@pytest.mark.parametrize("k", WRONG_SEEDS)
def test_per_build_speeds_no_longer_name_a_wrong_commit(k):
    def once(rule: Rule):
        rng = random.Random(f"steps/{k}")
        changes = {rng.randrange(1, 32): 0.03}
        return bisect_once(32, changes, lognormal(0.01), rule, rng, offsets=0.01)
    assert once(Rule()).wrong                       # the finding, as it stood
    checked = once(Rule(steps=True))
    assert not checked.wrong and checked.status in ("found", "ambiguous"), checked


def test_the_check_stays_inside_its_part_and_leaves_the_next_change_alone():
    """A review's case: two +4% changes; the part's like-neither commits marked untestable
    by the whole range were stepped over into the next change's level."""
    rng = random.Random("two/3")
    a = rng.randrange(1, 31)
    b = rng.randrange(a + 1, 32)
    t = bisect_once(32, {a: 0.04, b: 0.04}, lognormal(0.005), Rule(steps=True), rng)
    assert t.all_named, t


def test_an_ambiguous_answer_keeps_the_candidates_of_every_part_left_unplaced():
    from bisect_ngc.core.search import Result, Status
    from bisect_ngc.metric.segments import _answer
    parts = [Result(Status.AMBIGUOUS, last_old=0, candidates=(1, 2, 3), explanation="one"),
             Result(Status.AMBIGUOUS, last_old=8, candidates=(9, 10), explanation="two")]
    r = _answer([], parts, {}, 12)
    assert r.status is Status.AMBIGUOUS and r.candidates == (1, 2, 3, 9, 10)
    assert "one" in r.explanation and "also: two" in r.explanation
