"""A change in some runs only (bisect_ngc/metric/tails.py): exact under no change, and it
sees a slow path that the trimmed means cannot."""
from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.lib.metric_sim import bimodal, lognormal, spiky
from bisect_ngc.metric.tails import chance, worst_runs
from tests.lib.properties import examples


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(0, 40))
def test_the_chance_of_the_worst_runs_all_on_one_side_counts_every_ordering(n, m, t):
    """Of all the ways n + m distinct ranks split into the two sides, the share that puts
    the top t all on the side of n."""
    t = min(t, n)
    assert math.isclose(chance(t, n, m), math.comb(n + m - t, n - t) / math.comb(n + m, n),
                        rel_tol=1e-9)


@pytest.mark.stats
def test_under_no_change_it_speaks_at_most_at_p():
    """Both endpoints drawn alike, with two clock states, spikes, or neither: a change in
    some runs is told in at most p of the pairs (exact, so whatever the noise)."""
    rng, p, k = random.Random(3), 0.01, 3000
    for noise in (lognormal(0.01), bimodal(0.02), spiky(0.01)):
        told = sum(worst_runs([noise(rng) for _ in range(30)], [noise(rng) for _ in range(30)],
                              p) is not None for _ in range(k))
        assert told / k <= p + 3 * (p * (1 - p) / k) ** 0.5, told / k


def test_a_slow_path_in_some_runs_is_seen_the_way_it_goes():
    rng = random.Random(5)
    old = [rng.lognormvariate(0, 0.01) for _ in range(30)]
    new = [rng.lognormvariate(0, 0.01) * (1.15 if i % 3 == 0 else 1.0) for i in range(30)]
    tail = worst_runs(old, new, 0.01)
    assert tail is not None and tail.side == "new" and tail.runs >= 10, tail
    assert 0.13 < tail.change < 0.17
    gone = worst_runs(new, old, 0.01)          # the slow path went away
    assert gone is not None and gone.side == "old"
    assert worst_runs(old, new, 0.01, lower_is_better=False) is None   # slower is better
    low = [v / 1.15 if i % 3 == 0 else v for i, v in enumerate(old)]
    worse = worst_runs(old, low, 0.01, lower_is_better=False)
    assert worse is not None and worse.side == "new" and worse.change < 0


def test_a_centre_that_moved_is_no_change_in_some_runs():
    """Six of six new runs above every old one is a shift of the whole side (a 3% change
    at 2% noise, six runs a side, in a review): the endpoints could not be told apart yet,
    which is no change in some runs only."""
    old = [1.0, 1.01, 0.99, 1.005, 0.995, 1.002]
    assert worst_runs(old, [v * 1.05 for v in old], 0.01) is None


def test_a_whole_side_a_little_slower_is_no_change_in_some_runs():
    """Every new run 2.5% slower at 2% noise (a review: 11 of 30 new runs lay past the old
    side's slowest, and the answer said "a change in some runs only"): runs just past the
    other side's worst are a shift, not a second path."""
    rng = random.Random(0)
    old = [100 * rng.lognormvariate(0, 0.02) for _ in range(30)]
    new = [102.5 * rng.lognormvariate(0, 0.02) for _ in range(30)]
    assert worst_runs(old, new, 0.01) is None


def test_negative_numbers_keep_the_sign_of_their_change():
    """Around -10, 30% of new runs at -8.5 (higher): +15% worse, not -15%."""
    rng = random.Random(2)
    old = [-10 + rng.gauss(0, 0.05) for _ in range(30)]
    new = [(-8.5 if i % 3 == 0 else -10) + rng.gauss(0, 0.05) for i in range(30)]
    tail = worst_runs(old, new, 0.01)
    assert tail is not None and tail.side == "new" and 0.13 < tail.change < 0.17, tail

