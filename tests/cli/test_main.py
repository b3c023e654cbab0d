"""`bisect-ngc bisect` end to end with the local backend on generated repositories."""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bisect_ngc.core.search import ceil_log, expected_rounds
from bisect_ngc.core.store import Store

from tests.lib.repos import BUILD, TEST, make_repo
from tests.lib.repos import COUNTING_TEST, bisect_args

# The test also appends the commit to a counter file, so executions can be counted.







@pytest.fixture
def counter(tmp_path, monkeypatch):
    path = tmp_path / "counter"
    monkeypatch.setenv("COUNTER", str(path))
    return path


def executions(counter: Path) -> list[str]:
    return counter.read_text().split() if counter.exists() else []


@pytest.mark.slow
def test_finds_transition_through_unbuildable_stretches(tmp_path, counter, run_cli):
    shas = make_repo(tmp_path / "r", 400, 233, set(range(90, 110)) | set(range(300, 312)))
    code, out, _ = run_cli(bisect_args(tmp_path / "r", tmp_path / "st", "--json"))
    assert code == 0
    res = json.loads(out)
    assert set(res) >= {"status", "first_new", "last_old", "candidates", "old_outcome",
                        "new_outcome", "probes", "runs", "rounds", "skipped", "cached", "session"}
    assert (res["status"], res["first_new"], res["last_old"]) == ("found", shas[233], shas[232])
    assert (res["old_outcome"], res["new_outcome"]) == ("pass", "fail")
    assert res["cached"] == 0
    # every run is the belief's: no separate re-check, and it says how sure it is
    assert res["verification"]["probes"] == 0 and res["confidence"] >= 0.999
    assert res["runs"] == res["belief"]["runs"] == len(executions(counter))
    assert res["first_new_title"] == "change 233"


@pytest.mark.slow
def test_second_identical_run_searches_nothing_and_only_checks_the_answer(tmp_path, counter,
                                                                          run_cli):
    """The search comes from the cache; the answer's premises are seen again, fresh, in
    the new session (its commit new, its parent old): verdicts of another session never
    decide alone."""
    make_repo(tmp_path / "r", 120, 77)
    args = bisect_args(tmp_path / "r", tmp_path / "st", "--json")
    code, out, _ = run_cli(args)
    first = json.loads(out)
    before = executions(counter)
    code2, out2, _ = run_cli(args)
    second = json.loads(out2)
    assert code == code2 == 0
    assert sorted(executions(counter)[len(before):]) == \
        sorted([first["first_new"], first["last_old"]])
    assert second["probes"] == 2 and second["cached"] == len(set(before))
    assert second["belief"]["runs"] == first["runs"] + 2
    assert second["first_new"] == first["first_new"]
    assert second["session"] != first["session"]


@pytest.mark.slow
def test_overlapping_range_reuses_cached_verdicts(tmp_path, counter, run_cli):
    shas = make_repo(tmp_path / "r", 200, 150)
    run_cli(bisect_args(tmp_path / "r", tmp_path / "st"))
    before = len(executions(counter))
    code, out, _ = run_cli(["bisect", "--repo", str(tmp_path / "r"), "--old", shas[100],
                            "--new", "main", "--build", BUILD, "--test", COUNTING_TEST,
                            "--state", str(tmp_path / "st"), "--quiet", "--json"])
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[150]
    assert res["cached"] >= 2  # at least the new endpoint and the commit found
    assert len(executions(counter)) - before == res["runs"] + res["verification"]["runs"]


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [2, 4, 8])
def test_parallel_rounds_stay_within_bound(tmp_path, counter, run_cli, jobs):
    n = 500
    shas = make_repo(tmp_path / "r", n, 321)
    code, out, _ = run_cli(bisect_args(tmp_path / "r", tmp_path / "st", "--json",
                                       "--jobs", str(jobs)))
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[321]
    # bisection's rounds, and at most 3 more to reach --confidence with the premises seen
    assert res["rounds"] <= expected_rounds(n, jobs) + 3
    assert expected_rounds(n, jobs) <= ceil_log(n, jobs + 1) + 1
    worktrees = list((tmp_path / "st" / "worktrees").iterdir())[0]
    assert len(list(worktrees.glob("lane-0/slot-*"))) == jobs


@pytest.mark.slow
def test_probes_stay_within_git_bisect_run_plus_ten(tmp_path, counter, run_cli):
    """git bisect run's probes, about 3 more around the stretches of untestable commits,
    and the runs that earn 99.9% (docs/decisions.md: the price of --confidence)."""
    unbuildable = set(range(60, 75)) | set(range(190, 198))
    shas = make_repo(tmp_path / "r", 300, 141, unbuildable)
    code, out, _ = run_cli(bisect_args(tmp_path / "r", tmp_path / "st", "--json"))
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[141]
    script = tmp_path / "step.sh"
    script.write_text("#!/bin/sh\nexport BISECT_ARTIFACTS=$(mktemp -d)\n"
                      f"echo x >> {tmp_path}/gitcount\n"
                      f"{BUILD} || exit 125\n{TEST}\n")
    script.chmod(0o755)
    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path / "r", capture_output=True,  # noqa
                                    text=True, check=True).stdout
    git("bisect", "start", "--first-parent", "main", shas[0])
    git("bisect", "run", str(script))
    git_steps = len((tmp_path / "gitcount").read_text().split())
    assert res["probes"] <= git_steps + 10, (res["probes"], git_steps)


@pytest.mark.slow
def test_ambiguous_when_skips_straddle_the_transition(tmp_path, counter, run_cli):
    shas = make_repo(tmp_path / "r", 80, 40, {38, 39, 40})
    code, out, _ = run_cli(bisect_args(tmp_path / "r", tmp_path / "st", "--json"))
    res = json.loads(out)
    assert code == 4 and res["status"] == "ambiguous"
    assert res["candidates"] == shas[38:42] and shas[40] in res["candidates"]
    code, out, _ = run_cli(bisect_args(tmp_path / "r", tmp_path / "st2"))
    assert code == 4 and "Ambiguous" in out and shas[39] in out


def test_invalid_endpoints(tmp_path, counter, run_cli):
    make_repo(tmp_path / "r", 30, 100)  # no transition: every commit is old
    code, out, _ = run_cli(bisect_args(tmp_path / "r", tmp_path / "st", "--json"))
    res = json.loads(out)
    assert code == 3 and res["status"] == "invalid-endpoints"
    assert "both endpoints pass" in res["explanation"]
    assert res["probes"] == 2


@pytest.mark.slow
def test_finding_a_fix_is_the_same_search(tmp_path, counter, run_cli):
    shas = make_repo(tmp_path / "r", 64, 20)
    inverted = 'echo "$BISECT_COMMIT" >> "$COUNTER"; ! { ' + TEST + '; }'
    code, out, _ = run_cli(bisect_args(tmp_path / "r", tmp_path / "st", "--json",
                                       test=inverted))
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[20]
    assert (res["old_outcome"], res["new_outcome"]) == ("fail", "pass")


@pytest.mark.parametrize("args,words", [
    (["--old", "nope123"], "revision 'nope123' is not in"),
    (["--old", "--exec=x"], "not a valid git revision"),
    (["--old", "main", "--new", "main~3"], "is not an ancestor"),
])
def test_bad_input_is_one_sentence_and_a_hint(tmp_path, run_cli, args, words):
    make_repo(tmp_path / "r", 10, 5)
    base = {"--old": "main~9", "--new": "main"}
    it = iter(args)
    base.update(dict(zip(it, it)))
    argv = ["bisect", "--repo", str(tmp_path / "r"), "--test", "true", "--state",
            str(tmp_path / "st")] + [x for kv in base.items() for x in kv]
    code, out, err = run_cli(argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and words in err and "\nhint: " in err


def test_missing_repo_is_bad_input(tmp_path, run_cli):
    code, _, err = run_cli(["bisect", "--repo", str(tmp_path / "nowhere"), "--old", "a",
                            "--new", "b", "--test", "true", "--state", str(tmp_path)])
    assert code == 2 and "does not exist" in err


@pytest.mark.slow
def test_build_failure_is_a_skip_with_its_log_kept(tmp_path, counter, run_cli):
    make_repo(tmp_path / "r", 40, 20, {10})
    st = tmp_path / "st"
    run_cli(bisect_args(tmp_path / "r", st, "--jobs", "8"))
    store = Store(st)
    sid = store.latest().id
    skipped = [p for p in store.probes(sid) if p.verdict.value == "skip"]
    for p in skipped:
        assert p.reason == "build failed (exit 1)"
        assert (st / p.logs["build"]).exists() and not Path(p.logs["build"]).is_absolute()
    code, out, _ = run_cli(["log", "--state", str(st)])
    assert code == 0 and "round" in out


@pytest.mark.slow
def test_env_vars_and_worktree_cwd(tmp_path, run_cli):
    make_repo(tmp_path / "r", 8, 4)
    check = ('test "$BISECT_COMMIT" = "$(git rev-parse HEAD)" && test "$PWD" = "$BISECT_WORKTREE"'
             ' && test -d "$BISECT_ARTIFACTS" && ' + TEST)
    code, out, _ = run_cli(bisect_args(tmp_path / "r", tmp_path / "st", "--json", test=check))
    assert code == 0 and json.loads(out)["skipped"] == []


@pytest.mark.slow
def test_timeout_makes_a_skip(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 12, 6)
    slow = f'if [ "$BISECT_COMMIT" = {shas[6]} ]; then sleep 30; fi; ' + TEST
    code, out, _ = run_cli(bisect_args(tmp_path / "r", tmp_path / "st", "--json", "--timeout",
                                       "1", test=slow))
    res = json.loads(out)
    assert code == 4 and shas[6] in res["skipped"]
    probes = Store(tmp_path / "st").probes(res["session"])
    assert any(p.reason == "test timed out after 1s" for p in probes)


@pytest.mark.slow
def test_flaky_repro_with_repeat_any(tmp_path, counter, run_cli):
    shas = make_repo(tmp_path / "r", 50, 31)
    # New-behaviour commits fail only on every second run of the same commit.
    flaky = ('echo "$BISECT_COMMIT" >> "$COUNTER"; '
             'n=$(grep -c "$BISECT_COMMIT" "$COUNTER"); '
             'if grep -q new behaviour && [ $((n % 2)) -eq 0 ]; then exit 1; fi; exit 0')
    code, out, _ = run_cli(bisect_args(tmp_path / "r", tmp_path / "st", "--json", "--repeat",
                                       "2", test=flaky))
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[31]
    assert res["runs"] + res["verification"]["runs"] == len(executions(counter))


@pytest.mark.slow
def test_plan_builds_nothing(tmp_path, run_cli):
    make_repo(tmp_path / "r", 1000, 5)
    code, out, _ = run_cli(["plan", "--repo", str(tmp_path / "r"), "--old", "main~999",
                            "--new", "main", "--test", "true", "--jobs", "4", "--json"])
    res = json.loads(out)
    assert code == 0 and res["n_candidates"] == 999
    assert res["expected_rounds"] == 1 + ceil_log(999, 5)
    code, out, _ = run_cli(["plan", "--repo", str(tmp_path / "r"), "--old", "main~999",
                            "--new", "main", "--test", "true"])
    assert "999 commits after the old endpoint" in out and "round(s)" in out


@pytest.mark.slow
def test_status_and_log(tmp_path, counter, run_cli):
    make_repo(tmp_path / "r", 30, 12)
    run_cli(bisect_args(tmp_path / "r", tmp_path / "st"))
    code, out, _ = run_cli(["status", "--state", str(tmp_path / "st")])
    assert code == 0 and "found" in out and "29 candidates" in out
    code, out, _ = run_cli(["log", "--state", str(tmp_path / "st"), "--json"])
    rows = json.loads(out)
    assert code == 0 and rows[0]["round"] == 1 and len(rows) == len(executions(counter))
    code, _, err = run_cli(["log", "--state", str(tmp_path / "st"), "--session", "zzz"])
    assert code == 2 and "not found" in err


# --- killed, interrupted, and concurrent runs: real processes -----------------------------

def spawn(args, env, inherit_ignored_sigint=False):
    """The CLI as a process; optionally started as `cmd &` in a script starts it, with
    SIGINT ignored, which the CLI must undo."""
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if inherit_ignored_sigint \
        else None
    return subprocess.Popen([sys.executable, "-m", "bisect_ngc", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ignore)


def wait_for_lines(path: Path, n: int, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while len(executions(path)) < n:
        assert time.monotonic() < end, "the bisect never got going"
        time.sleep(0.05)


SLOW_TEST = 'echo "$BISECT_COMMIT" >> "$COUNTER"; sleep 0.4; ' + TEST


@pytest.mark.slow
@pytest.mark.parametrize("sig,code,ignored", [(signal.SIGKILL, -9, False),
                                              (signal.SIGINT, 130, False),
                                              (signal.SIGINT, 130, True),
                                              (signal.SIGTERM, 143, False)])
def test_killed_run_resumes_without_rerunning_finished_probes(tmp_path, counter, sig, code,
                                                              ignored):
    shas = make_repo(tmp_path / "r", 200, 111)
    env = dict(os.environ)
    args = bisect_args(tmp_path / "r", tmp_path / "st", "--json", test=SLOW_TEST)
    proc = spawn(args, env, inherit_ignored_sigint=ignored)
    wait_for_lines(counter, 4)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code
    if sig != signal.SIGKILL:
        assert "interrupted" in err and "run the same command again to resume" in err
        told = json.loads(out)
        assert (told["status"], told["exit_code"]) == ("interrupted", code)
        assert told["hint"] == ("run the same command again to resume: " +
                                shlex.join(["bisect-ngc", *args])) and told["session"]
    first = executions(counter)
    store = Store(tmp_path / "st")
    finished = {p.commit for p in store.probes(store.latest().id)}
    assert store.latest().status == ("running" if sig == signal.SIGKILL else "interrupted")
    proc = spawn(args, env)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    res = json.loads(out)
    assert res["first_new"] == shas[111]
    again = executions(counter)[len(first):]
    # a finished probe runs again only as the belief's check of the answer's premises
    assert finished & set(again) <= {res["first_new"], res["last_old"]}
    lost = len(first) - len(finished)             # the probe in flight when it was killed
    assert 0 <= lost <= 1 and res["runs"] == len(executions(counter)) - lost


@pytest.mark.slow
def test_second_process_on_same_state_gets_a_clear_error(tmp_path, counter):
    make_repo(tmp_path / "r", 200, 111)
    env = dict(os.environ)
    args = bisect_args(tmp_path / "r", tmp_path / "st", test=SLOW_TEST)
    first = spawn(args, env)
    try:
        wait_for_lines(counter, 1)
        second = spawn(args, env)
        out, err = second.communicate(timeout=30)
        assert second.returncode == 2
        assert f"is already running in pid {first.pid}" in err and "hint:" in err
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=30)
    proc = spawn(args + ["--json"], env)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and json.loads(out)["status"] == "found"


@pytest.mark.slow
def test_json_speaks_one_vocabulary(tmp_path, counter, run_cli):
    make_repo(tmp_path / "r", 30, 12)
    _, out, _ = run_cli(bisect_args(tmp_path / "r", tmp_path / "st", "--json"))
    res = json.loads(out)
    _, out, _ = run_cli(["plan", "--repo", tmp_path / "r", "--old", "main~29", "--new", "main",
                         "--test", "true", "--json"])
    plan = json.loads(out)
    _, out, _ = run_cli(["status", "--state", tmp_path / "st", "--json"])
    status = json.loads(out)[0]
    assert res["n_candidates"] == plan["n_candidates"] == status["n_candidates"] == 29
    assert isinstance(res["candidates"], list) and "candidates" not in plan | status
    assert res["probes"] == status["probes"] and res["runs"] == status["runs"]


@pytest.mark.parametrize("extra,needle", [
    (["--old", "main", "--new", "main~5"], "is not an ancestor"),     # swapped endpoints
    (["--old", "main~5", "--new", "main", "--jobs", "0"], "--jobs"),   # a usage error
    (["--old", "nosuchrev", "--new", "main"], "nosuchrev"),
])
def test_json_is_one_object_on_bad_input_too(tmp_path, run_cli, extra, needle):
    make_repo(tmp_path / "r", 8, 4)
    code, out, err = run_cli(["bisect", "--repo", tmp_path / "r", "--test", "true", "--state",
                              tmp_path / "st", "--json", *extra])
    told = json.loads(out)
    assert code == 2 and told["status"] == "error" and told["exit_code"] == 2
    assert needle in told["message"] and told["hint"] and needle in err
    code, out, err = run_cli(["bisect", "--repo", tmp_path / "r", "--test", "true", "--state",
                              tmp_path / "st", *extra])
    assert code == 2 and out == "" and needle in err


@pytest.mark.slow
def test_the_live_log_counts_candidates_as_plan_does(tmp_path, counter):
    make_repo(tmp_path / "r", 30, 12)
    args = [a for a in bisect_args(tmp_path / "r", tmp_path / "st") if a != "--quiet"]
    done = subprocess.run([sys.executable, "-m", "bisect_ngc", *args], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "starting; 29 candidates" in done.stderr, done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
def test_jobs_bounds_the_probes_at_a_time_endpoints_included(tmp_path, counter, run_cli, jobs):
    """`--jobs 1` once built and tested both endpoints at the same moment: two PyTorch
    builds with MAX_JOBS set to every CPU, or two repros sharing one GPU."""
    make_repo(tmp_path / "r", 30, 12)
    spans = tmp_path / "spans"
    build = f'echo "+ $(date +%s.%N)" >> {spans}; sleep 0.3; {BUILD}; echo "- $(date +%s.%N)" >> {spans}'
    code, _, _ = run_cli(bisect_args(tmp_path / "r", tmp_path / "st", "--jobs", str(jobs),
                                     "--verify", "0", build=build))
    assert code == 0
    busy, most = 0, 0
    for _, sign in sorted((float(t), s) for s, t in
                          (line.split() for line in spans.read_text().splitlines())):
        busy += 1 if sign == "+" else -1
        most = max(most, busy)
    assert most == jobs


@pytest.mark.parametrize("value", ["nan", "0.3", "1", "abc"])
def test_a_confidence_that_is_not_a_probability_is_a_usage_error(tmp_path, run_cli, value):
    code, out, err = run_cli(["bisect", "--repo", str(tmp_path), "--old", "a", "--new", "b",
                              "--test", "true", "--state", str(tmp_path / "st"),
                              "--confidence", value])
    assert code == 2 and "--confidence" in err, err
