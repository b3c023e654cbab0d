"""How many runs would tell a change (bisect_ngc/metric/power.py): the number an answer
without a difference gives, against Monte Carlo."""
from __future__ import annotations

import math
import random

import pytest

from bisect_ngc.metric import sequential as seq
from bisect_ngc.metric.comparator import Rule, looks
from bisect_ngc.metric.power import runs_to_tell

pytestmark = pytest.mark.stats     # Monte-Carlo rates: not in the one-minute loop


def test_the_runs_said_to_tell_a_change_tell_it_about_four_times_in_five():
    """Issue 52: under heavy load (25% run noise) a real 15% slowdown ended "could not be
    told apart within --max-runs 30" without saying how many runs would do. The number
    the answer now gives, at the noise and change measured, tells the change (Yuen's test
    at the next look's threshold, its 90% interval clear of --min-change) in about 80% of
    pairs, and half as many runs in far fewer."""
    rule, rng, s, change = Rule(), random.Random(8), 0.25, 0.15
    alpha = rule.alpha(len(looks(rule.max_runs)) + 1)
    n = runs_to_tell(s, math.log1p(change), rule.min_change, alpha, 0.95)
    assert n is not None and n > rule.max_runs

    def told(k: int) -> float:
        hits = 0
        for _ in range(300):
            a = [rng.gauss(0, s) for _ in range(k)]
            b = [rng.gauss(math.log1p(change), s) for _ in range(k)]
            _, _, _, p = seq.interval(a, b, alpha)
            _, low, _, _ = seq.interval(a, b, 0.1)
            hits += p <= alpha and math.expm1(low) >= rule.min_change
        return hits / 300
    assert 0.65 <= told(n) <= 0.95, (n, told(n))
    assert told(n // 2) < 0.5
    assert runs_to_tell(0.25, 0.02, 0.02, alpha, 0.95) is None   # at m: never told

