"""The answer is run again before it is given (issue 30, finding 7): the pure rule
(verification.py) and the whole path through the CLI on the local backend, with a test
that is flaky on purpose (seeded by which run of a commit it is)."""
from __future__ import annotations

import pytest

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.lib.repos import TEST, make_repo
from bisect_ngc.core.search import Result, Status, Verdict
from bisect_ngc.core.verification import claims, next_round, settle

from tests.lib.repos import bisect_args
from tests.lib.properties import examples

P, F, S = Verdict.PASS, Verdict.FAIL, Verdict.SKIP
FOUND = Result(Status.FOUND, first_new=7, last_old=6, candidates=(7,), old_outcome=P,
               new_outcome=F)
PAIRS = claims(FOUND, lambda i: "build")


def drive(fresh_runs: dict[int, list[Verdict]], verify: int = 3,
          seen: dict[int, list[Verdict]] | None = None) -> tuple[Result, int]:
    """Play the rounds: each round takes the next fresh verdict of each index asked."""
    keyed: dict[tuple[int, str], list[Verdict]] = {}
    rounds = 0
    while step := next_round(PAIRS, keyed, verify):
        rounds += 1
        for i, tier, _ in step:
            keyed.setdefault((i, tier), []).append(fresh_runs[i][len(keyed.get((i, tier), []))])
    if seen is not None:
        seen.update({i: v for (i, _), v in keyed.items()})
    return settle(FOUND, PAIRS, keyed, verify, 10), rounds


def test_the_pair_is_run_again_interleaved_and_the_answer_stands_when_it_agrees():
    answer, rounds = drive({6: [P] * 3, 7: [F] * 3})
    assert answer == FOUND and rounds == 3


def test_one_disagreeing_run_makes_it_ambiguous_with_the_runs():
    answer, rounds = drive({6: [P, F, P], 7: [F] * 3})
    assert answer.status is Status.AMBIGUOUS and answer.first_new is None
    assert "did not hold up" in answer.explanation and "#6 (build) was pass, again pass, fail" in \
        answer.explanation
    assert rounds == 2                       # no more runs once it cannot stand


def test_skips_are_retried_and_too_many_are_ambiguous():
    answer, _ = drive({6: [S, P, P, P], 7: [F, F, S, F]})
    assert answer == FOUND
    answer, _ = drive({6: [S] * 6, 7: [F] * 6})
    assert answer.status is Status.AMBIGUOUS and "could not be run again" in answer.explanation


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(0, 5), st.lists(st.sampled_from([P, F, S]), min_size=12, max_size=12),
       st.lists(st.sampled_from([P, F, S]), min_size=12, max_size=12))
def test_found_stands_only_on_verify_agreeing_fresh_runs(verify, old, new):
    fresh: dict[int, list[Verdict]] = {}
    answer, rounds = drive({6: old, 7: new}, verify, fresh)
    if verify == 0:
        assert answer == FOUND and rounds == 0
        return
    assert rounds <= 2 * verify
    ran = {i: [v for v in fresh.get(i, []) if v is not S] for i in (6, 7)}
    holds = all(len(ran[i]) >= verify for i in ran) and set(ran[6]) == {P} and \
        set(ran[7]) == {F}
    assert (answer.status is Status.FOUND) == holds, (fresh, answer)


def test_other_answers_are_given_as_they_are():
    stop = Result(Status.INVALID_ENDPOINTS, explanation="both pass")
    assert claims(stop, lambda i: "build") == ()
    assert next_round((), {}, 3) == () and settle(stop, (), {}, 3, 10) == stop


def test_not_in_commits_rests_on_the_image_and_the_build_each_run_again():
    """The release image's verdict at the commit and the build's both count: a flaky
    image run must not end the session alone (exit 5)."""
    answer = Result(Status.NOT_IN_COMMITS, last_old=0,
                    rests_on=((20, "image", F), (20, "build", P)))
    pairs = claims(answer, lambda i: "build")
    assert next_round(pairs, {}, 2) == pairs
    fresh = {(20, "image"): [P], (20, "build"): [P]}
    assert next_round(pairs, fresh, 2) == ()               # the image disagreed: stop
    out = settle(answer, pairs, fresh, 2, 30)
    assert out.status is Status.AMBIGUOUS and "#20 (image)" in out.explanation


# Commits 19..22 (old) fail on their first run only: a flake the search can meet.
FLAKY = ('echo "$BISECT_COMMIT" >> "$COUNTER"; '
         'i=$(($(git rev-list --first-parent --count HEAD) - 1)); '
         'if [ "$i" -ge 19 ] && [ "$i" -lt 23 ] && '
         '[ "$(grep -c "$BISECT_COMMIT" "$COUNTER")" -eq 1 ]; then exit 1; fi; ' + TEST)


@pytest.mark.slow
def test_a_flake_at_the_answer_is_caught_before_it_is_given(tmp_path, monkeypatch, run_cli):
    """A plain range is judged by the belief: the runs that earn its confidence run the
    flaky commits again, and their passes outweigh the first failure (--verify 0 too:
    the fixed re-check of this module is release mode's)."""
    shas = make_repo(tmp_path / "r", 40, 23)
    monkeypatch.setenv("COUNTER", str(tmp_path / "counter"))
    for verify in ("0", "3"):
        code, out, _ = run_cli(bisect_args(tmp_path / "r", tmp_path / f"st{verify}", "--json",
                                           "--verify", verify, test=FLAKY))
        res = json.loads(out)
        assert code == 0 and res["first_new"] == shas[23], res
        seen = (tmp_path / "counter").read_text().split()
        assert any(seen.count(c) > 1 for c in shas[19:23]), "no flaky commit was run again"
        (tmp_path / "counter").unlink()
