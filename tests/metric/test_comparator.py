"""The metric comparator (bisect_ngc/metric/comparator.py, sequential.py): properties on
synthetic distributions.

The rates are Monte Carlo estimates with fixed seeds; each bound leaves room for the
estimate's own error, so a change that makes the rule worse fails while a seed change
does not."""
from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.lib.metric_sim import bimodal, bisect_once, lognormal, oracle_runs, pareto
from bisect_ngc.metric import sequential as seq
from bisect_ngc.metric.comparator import (ENDPOINT_RUNS, Call, Rule, classify, drift, endpoints,
                                          judge, looks, settled)
from bisect_ngc.metric.confirmation import share
from bisect_ngc.core.search import Verdict
from tests.lib.properties import examples

pytestmark = pytest.mark.stats     # Monte-Carlo rates: not in the one-minute loop


def draw(rng: random.Random, k: int, level: float = 1.0, noise: float = 0.02) -> list[float]:
    return [level * rng.lognormvariate(0, noise) for _ in range(k)]


values = st.lists(st.floats(min_value=1.0, max_value=2.0, allow_nan=False), min_size=5,
                  max_size=20)


@settings(max_examples=examples(60), deadline=None)
@given(values, values, values, st.randoms(use_true_random=False))
def test_the_answer_does_not_depend_on_the_order_samples_arrive_in(a, b, x, rnd):
    rule = Rule(min_change=0.01)

    def answer() -> tuple:
        d = endpoints(a, b, rule)
        return d.call, classify(x, a, b, rule), d.p, d.shift.change
    before = answer()
    for sample in (a, b, x):
        rnd.shuffle(sample)
    after = answer()
    assert after[:2] == before[:2]
    # the numbers to the last few bits: a sum's order moves those (rounding both to a fixed
    # number of places can still split them across a boundary)
    assert math.isclose(after[2], before[2], rel_tol=1e-6, abs_tol=1e-12)
    assert math.isclose(after[3], before[3], rel_tol=1e-7, abs_tol=1e-12)


@pytest.mark.parametrize("noise", [lognormal(0.02), pareto(0.02), bimodal(0.02)],
                         ids=["lognormal", "pareto", "bimodal"])
def test_null_histories_name_no_culprit(noise):
    rng = random.Random(3)
    trials = [bisect_once(16, {}, noise, Rule(), rng) for _ in range(40)]
    assert not any(t.status == "found" for t in trials)


def test_false_differences_on_identical_distributions_stay_under_p():
    """The hardest case: no minimum change, so only the p threshold guards the answer,
    over every look up to max_runs."""
    rule = Rule(p=0.05, min_change=0.0, max_runs=20)
    rng = random.Random(7)
    false = 0
    for _ in range(300):
        old, new = draw(rng, 20, noise=0.03), draw(rng, 20, noise=0.03)
        false += any(endpoints(old[:k], new[:k], rule).call == "differ" for k in looks(20))
    assert false / 300 <= rule.p + 3 * (rule.p * (1 - rule.p) / 300) ** 0.5


def test_two_clock_states_at_the_first_look_stay_under_its_threshold():
    """Two clock states 10% apart, each run in either, and no change: at five runs a side
    the trimmed means dropped each side's one run of the other state, and 1.8% of pairs
    were called different against the first look's 0.5% (a null session then bisects).
    Welch's test on every run keeps it under."""
    rule, rng, noise, k = Rule(), random.Random(11), bimodal(0.02), 4000
    false = sum(endpoints([noise(rng) for _ in range(5)], [noise(rng) for _ in range(5)],
                          rule).call == "differ" for _ in range(k))
    alpha = rule.alpha(1)
    assert false / k <= alpha + 3 * (alpha * (1 - alpha) / k) ** 0.5, false / k


def test_far_apart_sides_decide_a_commit_in_one_run():
    """45 noise widths apart (the H200's 2.25% at 0.05%): one run is enough."""
    rng = random.Random(1)
    old, new = draw(rng, 5, 1.0, 0.0005), draw(rng, 5, 1.0225, 0.0005)
    rule = Rule()
    assert classify(draw(rng, 1, 1.0225, 0.0005), old, new, rule) is Call.LIKE_NEW
    assert classify(draw(rng, 1, 1.0, 0.0005), old, new, rule) is Call.LIKE_OLD
    d = endpoints(old, new, rule)
    assert d.call == "differ" and d.n_old == ENDPOINT_RUNS == 5     # the first look


def test_the_commits_the_search_asks_cost_what_the_oracle_pays():
    """At 45 noise widths one run decides each commit the search asks, as it does for the
    oracle; the rest of a session is its endpoints and its later rounds (the fresh check),
    and the phases add up to its runs."""
    rng = random.Random(4)
    for _ in range(5):
        at = rng.randrange(1, 32)
        t = bisect_once(32, {at: 0.0225}, lognormal(0.0005), Rule(), rng)
        endpoints_, asked, guards, more = t.phases
        assert t.right and endpoints_ + asked + guards + more == t.runs
        assert asked == oracle_runs(32, 0.0225, lognormal(0.0005), Rule(), rng, at)
        assert endpoints_ >= 2 * ENDPOINT_RUNS and more > 0


def test_a_slowdown_and_a_speedup_are_the_same_search():
    rng = random.Random(2)
    for change in (0.08, -0.08):
        t = bisect_once(40, {17: change}, lognormal(0.02), Rule(), rng)
        assert t.right, t


def test_classify_by_side_like_neither_in_between_and_unknown_at_first():
    rng = random.Random(1)
    old, new = draw(rng, 20, 1.0), draw(rng, 20, 1.2)
    rule = Rule()
    assert classify(draw(rng, 5, 1.0), old, new, rule) is Call.LIKE_OLD
    assert classify(draw(rng, 5, 1.2), old, new, rule) is Call.LIKE_NEW
    assert classify(draw(rng, 12, 1.1), old, new, rule) is Call.NEITHER  # a third level
    assert classify(draw(rng, 12, 1.5), old, new, rule) is Call.NEITHER  # up, then back
    assert classify(draw(rng, 4, 1.1), old, new, rule) is Call.UNKNOWN   # not yet a finding
    assert classify(draw(rng, 1, 1.1), old, new, rule) is Call.UNKNOWN   # one run: not yet
    assert classify([], old, new, rule) is Call.UNKNOWN


def test_endpoints_same_when_the_interval_is_inside_the_minimum_change():
    rng = random.Random(4)
    d = endpoints(draw(rng, 8, noise=0.001), draw(rng, 8, noise=0.001), Rule())
    assert d.call == "same" and abs(d.shift.change) < 0.02
    assert "interval" in d.describe(Rule())
    d = endpoints(draw(rng, 5, noise=0.05), draw(rng, 5, noise=0.05), Rule())
    assert d.call == "unknown"


def test_a_change_below_min_change_is_rarely_called_a_difference():
    """--min-change 2%: a true 1.5% change at 2% noise is a difference only when the data
    say it is at least 2% with 95% confidence (finding 5: 31 of 100 before)."""
    rng = random.Random(5)
    rule = Rule(min_change=0.02, max_runs=30)
    called = 0
    for _ in range(100):
        old, new = draw(rng, 30), draw(rng, 30, 1.015)
        called += any(endpoints(old[:k], new[:k], rule).call == "differ" for k in looks(30))
    assert called <= 5


def test_describe_says_the_confidence_as_it_is():
    rng = random.Random(4)
    d = endpoints(draw(rng, 9), draw(rng, 9, 1.1), Rule())
    assert "100%" not in d.describe(Rule())


def tag(values: list[float], rnd: int = 1) -> list[tuple[int, float]]:
    return [(rnd, v) for v in values]


def test_judge_asks_for_endpoints_then_more_then_skips_what_never_measured():
    rule = Rule(block=5, max_runs=10)
    assert judge(8, {}, {}, rule).more == (0, 7)
    rng = random.Random(0)
    old, new = tag(draw(rng, 2)), tag(draw(rng, 2, 1.5))
    assert judge(8, {0: old, 7: new}, {0: 2, 7: 2}, rule).more == (0, 7)   # too few yet
    old, new = tag(draw(rng, 5)), tag(draw(rng, 5, 1.5))
    j = judge(8, {0: old, 7: new, 3: []}, {0: 5, 7: 5, 3: 5}, rule)
    assert j.difference.call == "differ" and j.verdicts[3] is Verdict.SKIP
    j = judge(8, {0: old, 7: new, 3: tag(draw(rng, 1, 1.25))}, {0: 5, 7: 5, 3: 1}, rule)
    assert j.more == (3,)
    j = judge(8, {0: old, 7: new, 3: tag(draw(rng, 10, 1.25))}, {0: 5, 7: 5, 3: 10}, rule)
    assert j.more == () and j.verdicts[3] is Verdict.SKIP      # unresolved at max runs
    j = judge(8, {0: [], 7: new}, {0: 5, 7: 5}, rule)
    assert j.verdicts == {0: Verdict.SKIP, 7: Verdict.FAIL} and not j.more
    assert judge(8, {0: []}, {0: 1}, rule).more == (0, 7)        # a run with no number: again


@pytest.mark.parametrize("kwargs", [{"p": 0}, {"min_change": -0.01}, {"block": 1},
                                    {"block": 10, "max_runs": 5}])
def test_rule_rejects_nonsense(kwargs):
    with pytest.raises(ValueError):
        Rule(**kwargs)


def test_a_round_s_drift_is_corrected_by_its_reference_runs():
    """The machine got 10% slower between round 1 (endpoints) and round 2: commit 3, like
    old, is measured in round 2; uncorrected it looks new. Beside one or two runs of each
    end it is like old, or asks for more runs: never like new."""
    rule = Rule()
    for guards in (1, 2):
        rng = random.Random(8)
        old = tag(draw(rng, 5, 1.0, 0.005), 1) + tag(draw(rng, guards, 1.1, 0.005), 2)
        new = tag(draw(rng, 5, 1.2, 0.005), 1) + tag(draw(rng, guards, 1.32, 0.005), 2)
        x = tag(draw(rng, 3, 1.1, 0.005), 2)
        samples = {0: old, 7: new, 3: x}
        j = judge(8, samples, {0: 5 + guards, 7: 5 + guards, 3: 3}, rule,
                  settled(8, samples, rule))
        assert j.verdicts.get(3) is Verdict.PASS or 3 in j.more
    assert classify([v for _, v in x], [v for _, v in old[:5]], [v for _, v in new[:5]],
                    rule) is not Call.LIKE_OLD


def test_a_slow_drift_is_seen_and_reported():
    """The machine gets 1% slower every round; the guard runs of each round show it."""
    rng = random.Random(3)
    old, new = tag(draw(rng, 5, 1.0, 0.005), 1), tag(draw(rng, 5, 1.2, 0.005), 1)
    for r in range(2, 12):
        old += tag(draw(rng, 1, 1.01 ** r, 0.005), r)
        new += tag(draw(rng, 1, 1.2 * 1.01 ** r, 0.005), r)
    seen = drift({0: old, 7: new}, {0: Verdict.PASS, 7: Verdict.FAIL})
    assert seen.get(11, 0) > 0.02 and seen.get(11, 0) > seen.get(2, 0)


def test_drift_between_runs_names_no_wrong_commit():
    rng = random.Random(12)
    trials = [bisect_once(32, {rng.randrange(1, 32): 0.08}, lognormal(0.02), Rule(), rng,
                          drift=0.002) for _ in range(30)]
    assert not any(t.wrong for t in trials)
    assert sum(t.right for t in trials) >= 15 and not any(t.status == "exit-3" for t in trials)


def test_the_noise_scale_is_robust_and_sees_two_clock_states():
    assert seq.noise([[1.0] * 9 + [50.0]]) < 1.0                   # one outlier moves nothing
    two = [0.0, 0.095, 0.0, 0.095, 0.0, 0.095, 0.0, 0.095]
    assert seq.noise([two]) > 0.04                                 # two modes are spread
    assert statistics.median([seq.llr(v, 0.0, 1.0, 0.1) for v in (0.9, 1.0, 1.1)]) > 0


def test_a_two_commit_range_with_no_change_names_no_culprit():
    """Both commits are the endpoints and the pair: the runs that made the endpoints
    differ cannot also confirm the answer (found at seeds 28, 30, 100 by review)."""
    rule = Rule(p=0.05, min_change=0.0, block=5, max_runs=5)
    for seed in range(300):
        t = bisect_once(2, {}, lognormal(0.02), rule, random.Random(seed))
        assert t.status != "found", (seed, t)


def test_a_rounded_metric_is_not_a_metric_without_noise():
    """Runs that tie in the middle have a Winsorized variance of 0: Yuen's test said
    "differ" at p = 4.7e-19 for two samples that overlap."""
    d = endpoints([20, 20, 19, 20, 21], [21, 21, 20, 21, 21], Rule())
    assert d.call != "differ" and d.p > 1e-4
    rng, false = random.Random(2), 0
    for _ in range(300):
        draw_ = lambda: [round(100 * rng.lognormvariate(0, 0.01)) for _ in range(30)]  # noqa
        a, b = draw_(), draw_()
        false += any(endpoints(a[:k], b[:k], Rule(min_change=0.0)).call == "differ"
                     for k in looks(30))
    assert false / 300 <= 0.01 + 3 * (0.01 * 0.99 / 300) ** 0.5


def test_a_share_of_a_metric_that_crosses_zero_is_a_number():
    assert abs(share(0.05, 1.05 ** 2 - 1) - 0.5) < 1e-9
    assert share(-2.0, -4.0) == 0.5 and share(0.1, 0.0) == 0.0


def test_on_a_machine_mostly_in_its_upper_clock_state_a_commit_like_new_is_like_new():
    """Two clock states 10% apart, 60% of the runs in the upper one: the sides' runs are
    folded once. Folded twice, a whole side moved down by the gap (the fold of runs all in
    one state prefers the more common state), and commits like new were called like
    neither: 44 of 100 bimodal sessions ended ambiguous."""
    rng = random.Random(5)

    def runs(level: float, k: int, rnd: int) -> list[tuple[int, float]]:
        return [(rnd, level * rng.lognormvariate(0, 0.02) * (1.1 if rng.random() < 0.6 else 1))
                for _ in range(k)]
    for seed in range(5):
        rng.seed(seed)
        samples = {0: runs(1.0, 30, 1), 31: runs(1.05, 30, 1), 15: runs(1.05, 20, 2)}
        samples[0] += runs(1.0, 3, 2)
        samples[31] += runs(1.05, 3, 2)
        rule = Rule()
        assert seq.states([[math.log(v) for _, v in s] for s in samples.values()]) is not None
        j = judge(32, samples, {i: len(s) for i, s in samples.items()}, rule,
                  settled(32, samples, rule))
        assert j.calls[15] is Call.LIKE_NEW, (seed, j.calls)


def test_a_continued_session_keeps_what_its_last_look_decided():
    """--max-runs 30 decides at its last look (30 runs, not a look of --max-runs 60's
    sequence); continued with --max-runs 60, that look stays a look at the same place."""
    rng = random.Random(3)
    old = [(1, rng.lognormvariate(0, 0.02)) for _ in range(30)]
    new = [(1, 1.03 * rng.lognormvariate(0, 0.02)) for _ in range(30)]
    samples = {0: old, 11: new}
    assert settled(12, samples, Rule(max_runs=30)).call == "differ"
    assert settled(12, samples, Rule(max_runs=60)) is None       # 30 is no look of 60's
    kept = settled(12, samples, Rule(max_runs=60, earlier=(30,)))
    assert kept is not None and kept.p == settled(12, samples, Rule(max_runs=30)).p
    assert looks(90, (30, 60)) == [5, 8, 12, 18, 27, 30, 40, 60, 90]
