"""The one verdict pipeline: facts in, verdict, reason and cacheability out."""
from __future__ import annotations

import pytest

from bisect_ngc.core.search import RepeatPolicy, Verdict
from bisect_ngc.core.verdicts import (BuildFact, RunFact, judge_exit, judge_probe, judge_run,
                                      reported_commit)

SHA = "ab" * 20


@pytest.mark.parametrize("code,verdict,words,cacheable", [
    (0, Verdict.PASS, "", True),
    (1, Verdict.FAIL, "", True),
    (125, Verdict.SKIP, "exited 125", True),
    (127, Verdict.FAIL, "command not found", True),
    (-9, Verdict.SKIP, "killed by signal 9", False),
    (137, Verdict.SKIP, "128 or above", False),
    (None, Verdict.SKIP, "no exit code", False),
])
def test_exit_codes_follow_git_bisect_run(code, verdict, words, cacheable):
    got, reason, ok = judge_exit(code)
    assert (got, ok) == (verdict, cacheable) and words in reason


def test_a_timed_out_run_is_an_uncached_skip_that_names_the_limit():
    verdict, reason, ok = judge_run(RunFact(0, 5.0, timed_out=True, limit=5))
    assert verdict is Verdict.SKIP and reason == "test timed out after 5s" and not ok


def test_the_torch_commit_must_match_when_asked():
    good = RunFact(1, details={"torch_git_version": SHA})
    wrong = RunFact(1, details={"torch_git_version": "cd" * 20})
    assert judge_run(good, SHA)[0] is Verdict.FAIL
    verdict, reason, ok = judge_run(wrong, SHA)
    assert verdict is Verdict.SKIP and not ok
    assert reason == f"the container reports torch git version {'cd' * 20}, not the probed " \
                     f"commit {SHA[:12]}"
    assert judge_run(RunFact(0), SHA)[1].startswith("the container reports torch git "
                                                    "version none")
    assert judge_run(wrong, None)[0] is Verdict.FAIL       # no check unless asked
    assert judge_run(RunFact(125), SHA)[0] is Verdict.SKIP  # a skip stays a skip


def test_builds_failed_and_timed_out_are_worded_once_for_every_backend():
    failed = judge_probe(BuildFact(2, 3.0), [], RepeatPolicy.ANY)
    assert (failed.verdict, failed.reason, failed.cacheable) == \
        (Verdict.SKIP, "build failed (exit 2)", True)
    slow = judge_probe(BuildFact(None, 60.0, timed_out=True, limit=60), [], RepeatPolicy.ANY)
    assert (slow.reason, slow.cacheable) == ("build timed out after 60s", False)


def test_repeats_combine_and_a_split_is_an_uncached_skip():
    runs = [RunFact(0, 1.0), RunFact(1, 2.0, details={"signature": "x"})]
    any_ = judge_probe(BuildFact(0, 1.0), runs, RepeatPolicy.ANY)
    assert any_.verdict is Verdict.FAIL and any_.test_s == 3.0 and any_.exit_code == 1
    assert any_.details == {"signature": "x"} and any_.runs == [Verdict.PASS, Verdict.FAIL]
    tie = judge_probe(None, runs, RepeatPolicy.MAJORITY)
    assert tie.verdict is Verdict.SKIP and "split evenly" in tie.reason and not tie.cacheable


def test_a_skip_is_cached_only_when_every_skipping_run_asked_for_it():
    asked = judge_probe(None, [RunFact(125), RunFact(125)], RepeatPolicy.MAJORITY)
    assert asked.verdict is Verdict.SKIP and asked.cacheable
    mixed = judge_probe(None, [RunFact(125), RunFact(-15)], RepeatPolicy.MAJORITY)
    assert mixed.verdict is Verdict.SKIP and not mixed.cacheable


def test_an_ngc_image_reports_its_commit_in_the_version_when_git_version_is_unknown():
    sha = "b465a5843b92f33fe3e89ff7ee91c6833df6aec0"
    ngc = {"torch_git_version": "Unknown", "torch_version": "2.5.0a0+b465a5843b.nv24.09"}
    assert reported_commit(ngc) == "b465a5843b"
    assert judge_run(RunFact(0, details=ngc), sha)[0] is Verdict.PASS
    assert judge_run(RunFact(0, details=ngc), "b465a5843c" + sha[10:])[0] is Verdict.SKIP
    assert reported_commit({"torch_git_version": sha, "torch_version": "2.5.0"}) == sha
    assert reported_commit({"torch_git_version": "Unknown", "torch_version": "2.5.0"}) == \
        "Unknown"
    assert judge_run(RunFact(0, details={"torch_git_version": "abc"}), sha)[0] is Verdict.SKIP


def test_a_test_that_says_why_it_cannot_test_gives_that_reason():
    said = RunFact(125, details={"skip_reason": "companion te@abc does not import"})
    assert judge_run(said) == (Verdict.SKIP, "companion te@abc does not import", True)
    ignored = RunFact(1, details={"skip_reason": "not a skip"})
    assert judge_run(ignored) == (Verdict.FAIL, "", True)
