"""Several changes in one range (bisect_ngc/segments.py): the search over segments, on
synthetic numbers through the same loop the engine runs (benchmarks.metric_verdicts)."""
from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.metric_verdicts import bisect_once, lognormal
from bisect_ngc.metric.comparator import Rule


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 30), st.integers(1, 30), st.integers(0, 2 ** 16))
def test_two_changes_in_the_same_direction_are_both_named(a, b, seed):
    """Two +8% steps at 0.5% noise: both commits named, whatever their places."""
    if a == b:
        return
    t = bisect_once(32, {a: 0.08, b: 0.08}, lognormal(0.005), Rule(), random.Random(seed))
    assert t.status == "found" and set(t.named) == {a, b}, t


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 30), st.integers(1, 30), st.integers(0, 2 ** 16))
def test_up_and_back_down_names_both_changes(a, b, seed):
    """2.5 times slower at the first, faster than before at the second: the commits in
    between are measured clearly, and both changes are named."""
    if abs(a - b) < 1:
        return
    lo, hi = sorted((a, b))
    t = bisect_once(32, {lo: 1.5, hi: -0.64}, lognormal(0.005), Rule(), random.Random(seed))
    assert t.status == "found" and set(t.named) == {lo, hi}, t


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 31), st.integers(0, 2 ** 16))
def test_one_change_is_named_alone(at, seed):
    t = bisect_once(32, {at: 0.05}, lognormal(0.005), Rule(), random.Random(seed))
    assert t.status == "found" and t.named == (at,), t


def _runs(rounds: range, level: float, per_round: int = 1, seed: int = 0, sigma: float = 0.005):
    rng = random.Random(seed)
    return [(r, level * rng.lognormvariate(0, sigma)) for r in rounds for _ in range(per_round)]


def test_a_pair_measured_in_different_rounds_is_not_a_difference():
    """The machine slowed 10% between round 1 and round 2: #0 and #1 never ran side by
    side, so they are not compared at all (the answer's pair is then run again, together;
    at 0.5% drift per run, a part's pair once was named from such numbers)."""
    from bisect_ngc.metric.confirmation import pair
    samples = {0: _runs(range(1, 2), 1.00, 5, 1), 1: _runs(range(2, 3), 1.10, 5, 2)}
    assert pair(0, 1, samples, Rule()) is None


def test_the_drift_guard_keeps_a_third_of_an_ends_runs_for_the_answer():
    from bisect_ngc.metric.comparator import guard
    from bisect_ngc.core.search import Verdict
    verdicts = {0: Verdict.PASS, 3: Verdict.FAIL}
    rule = Rule(max_runs=30)
    assert guard(verdicts, 4, {0: 19, 3: 5}, rule) == (0, 3)
    assert guard(verdicts, 4, {0: 20, 3: 5}, rule) == (3,)


@settings(max_examples=200, deadline=None)
@given(st.floats(-0.2, 0.2), st.floats(0.001, 0.05), st.integers(2, 12), st.integers(0, 2 ** 16))
def test_a_pair_differs_exactly_when_its_interval_is_clear_of_zero(step, sigma, runs, seed):
    """The call and the interval the report prints are one statement (a 15% slowdown was
    once called "differ" with an interval from -0.4%)."""
    from bisect_ngc.metric.confirmation import pair
    samples = {0: _runs(range(1, 3), 1.0, runs, seed, sigma),
               1: _runs(range(1, 3), 1.0 + step, runs, seed + 1, sigma),
               2: _runs(range(1, 3), 1.0 + step, runs, seed + 2, sigma)}
    for sg in (1.0, -1.0):          # a metric that grows and one that shrinks
        s = {i: [(r, v ** sg) for r, v in side] for i, side in samples.items()}
        d, ends = pair(0, 1, s, Rule()), pair(0, 2, s, Rule())
        assert d is not None and ends is not None
        towards_ends = (d.shift.change > 0) == (ends.shift.change > 0)
        clear = d.shift.low > 0 if d.shift.change > 0 else d.shift.high < 0
        assert (d.call == "differ") == (clear and towards_ends), d
