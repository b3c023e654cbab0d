"""What a new user meets in the first hour (issue 33): `--json` is one value for every
outcome, git's habits, and the small words."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.lib.repos import BUILD, TEST, make_repo


def _one_json_value(out: str) -> dict:
    value = json.loads(out)          # exactly one value: json.loads rejects trailing text
    assert isinstance(value, dict)
    return value


@pytest.mark.parametrize("args", [
    ["bisect", "--json", "--bogus"],
    ["bisect", "--json", "--repo"],
    ["status", "--json", "--bogus"],
    ["components", "--json"],
    ["components", "--json", "--to", "24.10", "--test", "true"],
])
def test_usage_errors_are_one_json_value(run_cli, args):
    code, out, err = run_cli(args)
    value = _one_json_value(out)
    assert code == 2 and value["status"] == "error" and value["exit_code"] == 2
    assert "Traceback" not in err


def test_a_missing_required_option_is_named_not_a_traceback(run_cli):
    code, _, err = run_cli(["components", "--to", "24.10", "--test", "true"])
    assert code == 2 and "Missing option '--from'" in err


def test_dry_run_with_json_prints_one_value(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 10, 4)
    code, out, _ = run_cli(["bisect", "--repo", tmp_path / "r", "--old", "main~9",
                            "--new", "main", "--build", BUILD, "--test", TEST,
                            "--state", tmp_path / "st", "--dry-run", "--json"])
    value = _one_json_value(out)
    assert code == 0 and value["status"] == "dry-run"
    assert [p["commit"] for p in value["next_round"]] == [shas[0], shas[9]]


def _bisect(repo, state, test, *extra):
    return ["bisect", "--repo", repo, "--old", "main~19", "--new", "main", "--test", test,
            "--state", state, "--quiet", "--json", *extra]


@pytest.mark.slow
def test_a_test_that_crashes_mid_range_stops_as_git_bisect_run_does(tmp_path, run_cli):
    """Exit 200 at one commit was a silent skip, and the session still ended `found`.
    git stops: "exit code 200 ... is < 0 or >= 128". So does this tool, keeping the state:
    once the test is fixed, the same command resumes."""
    shas = make_repo(tmp_path / "r", 20, 13)
    flag = tmp_path / "still-broken"
    flag.write_text("")
    test = (f'v=$(cat version.txt); [ -e {flag} ] && [ $v -ge 7 ] && [ $v -le 12 ] && '
            'exit 200; test "$(cat behaviour)" = old')
    code, out, err = run_cli(_bisect(tmp_path / "r", tmp_path / "st", test))
    told = _one_json_value(out)
    assert code == 2 and told["status"] == "error" and "exited 200" in told["message"]
    assert "128 or above, or a signal, stops the bisection" in err and "run the same command" in err
    flag.unlink()
    code, out, _ = run_cli(_bisect(tmp_path / "r", tmp_path / "st", test))
    assert code == 0 and _one_json_value(out)["first_new"] == shas[13]


@pytest.mark.slow
def test_an_untracked_test_script_is_named_before_anything_runs(tmp_path, run_cli,
                                                                 monkeypatch):
    """`git bisect run ./mytest.sh` runs the file in the checkout; here each commit is
    tested in a fresh worktree, where an untracked file is missing. Both endpoints used
    to fail with exit 127 and nothing said why. Now a warning says so first (a build may
    make the file, so it is no refusal), and the answer names the fresh worktree."""
    shas = make_repo(tmp_path / "r", 20, 13)
    script = tmp_path / "r" / "mytest.sh"
    script.write_text('#!/bin/sh\ntest "$(cat behaviour)" = old\n')
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path / "r")
    code, out, err = run_cli(_bisect(".", tmp_path / "st", "./mytest.sh"))
    assert code == 3 and "./mytest.sh, which git does not track" in err and str(script) in err
    assert "fresh worktree" in json.loads(out)["endpoint_reasons"]["old"]
    code, out, _ = run_cli(_bisect(".", tmp_path / "st", str(script)))
    assert code == 0 and _one_json_value(out)["first_new"] == shas[13]


@pytest.mark.slow
@pytest.mark.parametrize("test", [
    "rm -f result.txt; cp behaviour result.txt; grep -q old result.txt",
    "./check",                                   # made by the build in every worktree
])
def test_files_a_test_only_reads_or_its_build_makes_draw_no_warning_or_refusal(
        tmp_path, run_cli, monkeypatch, test):
    shas = make_repo(tmp_path / "r", 20, 13)
    (tmp_path / "r" / "result.txt").write_text("left over\n")
    (tmp_path / "r" / "check").write_text("#!/bin/sh\nexit 1\n")   # built here once, untracked
    build = 'printf \'#!/bin/sh\\ntest "$(cat behaviour)" = old\\n\' > check; chmod +x check'
    monkeypatch.chdir(tmp_path / "r")
    code, out, err = run_cli(_bisect(".", tmp_path / "st", test, "--build", build))
    assert code == 0 and _one_json_value(out)["first_new"] == shas[13]
    assert ("warning" in err) == (test == "./check")        # said, never refused
    assert (tmp_path / "r" / "result.txt").read_text() == "left over\n"


@pytest.mark.slow
def test_a_directory_inside_the_checkout_names_the_checkout(tmp_path, run_cli, monkeypatch):
    shas = make_repo(tmp_path / "r", 20, 13)
    (tmp_path / "r" / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "r" / "sub")
    code, out, _ = run_cli(_bisect(".", tmp_path / "st", 'test "$(cat behaviour)" = old'))
    assert code == 0 and _one_json_value(out)["first_new"] == shas[13]


@pytest.mark.slow
def test_a_bisect_line_runs_under_every_verb(tmp_path, run_cli):
    """`probe … --jobs 4` said "No such option", and so did --json, --metric, --quiet and
    --max-skips; plan and slurm submit rejected --metric. Changing the verb is enough."""
    shas = make_repo(tmp_path / "r", 10, 4)
    line = ["--repo", tmp_path / "r", "--old", "main~9", "--new", "main", "--build", BUILD,
            "--test", TEST, "--state", tmp_path / "st", "--jobs", "4", "--max-skips", "3",
            "--quiet", "--json"]
    code, out, _ = run_cli(["plan", *line])
    assert code == 0 and _one_json_value(out)["n_candidates"] == 9
    code, out, _ = run_cli(["probe", *line, "--commit", "main"])
    assert code == 1 and _one_json_value(out)["verdict"] == "fail"
    code, out, _ = run_cli(["probe", *line, "--commit", "main", "--dry-run"])
    assert code == 0 and _one_json_value(out)["next_round"][0]["commit"] == shas[9]
    code, out, _ = run_cli(["slurm", "submit", *line, "--dry-run"])
    told = _one_json_value(out)
    assert code == 0 and told["status"] == "dry-run" and "--max-skips" in told["command"]
    metric = [w for w in line if w not in ("--jobs", "4")] + ["--metric", "step_ms",
                                                               "--max-runs", "10"]
    for verb in (["plan"], ["slurm", "submit", "--dry-run"]):
        code, out, _ = run_cli([*verb, *metric])
        assert code == 0 and _one_json_value(out), verb
    code, out, _ = run_cli(["slurm", "submit", *metric, "--dry-run"])
    assert "--metric" in _one_json_value(out)["command"]


def test_a_failed_clone_leaves_no_lock_file_behind(tmp_path, run_cli):
    code, _, err = run_cli(["plan", "--repo", f"file://{tmp_path}/nowhere.git", "--old", "a",
                            "--new", "b", "--test", "true", "--cache-dir", tmp_path / "cache",
                            "--state", tmp_path / "st"])
    assert code == 2 and "could not clone" in err
    assert not list((tmp_path / "cache").rglob("*.lock"))


def test_the_mirror_lock_still_lets_one_holder_in_at_a_time(tmp_path):
    import threading
    import time
    from bisect_ngc.vcs.mirrors import locked
    inside, most = [0], [0]

    def work():
        for _ in range(20):
            with locked(tmp_path / "m"):
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                time.sleep(0.001)
                inside[0] -= 1
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1 and not (tmp_path / "m.lock").exists()


@pytest.mark.slow
def test_an_ambiguous_answer_names_its_commits_with_titles_and_reasons(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 12, 6, {5})
    code, out, _ = run_cli(["bisect", "--repo", tmp_path / "r", "--old", "main~11",
                            "--new", "main", "--build", BUILD, "--test", TEST,
                            "--state", tmp_path / "st", "--quiet"])
    assert code == 4
    assert f"  {shas[5]} change 5  [skipped: build failed (exit 1)]" in out
    assert f"  {shas[6]} change 6 (#1006)" in out


@pytest.mark.slow
def test_status_tells_a_session_whose_process_is_gone(tmp_path, run_cli):
    from bisect_ngc.core.records import SessionStatus
    from bisect_ngc.core.store import Store
    make_repo(tmp_path / "r", 12, 6)
    run_cli(["bisect", "--repo", tmp_path / "r", "--old", "main~11", "--new", "main",
             "--build", BUILD, "--test", TEST, "--state", tmp_path / "st", "--quiet"])
    store = Store(tmp_path / "st")
    store.set_status(store.latest().id, SessionStatus.RUNNING)      # as a SIGKILL leaves it
    code, out, _ = run_cli(["status", "--state", tmp_path / "st"])
    assert code == 0 and "stopped" in out and "the same command resumes" in out
    assert "11 candidates" in out


def _titled_repo(path, titles: list[str], transition: int) -> list[str]:
    def git(*args):
        return subprocess.run(["git", *args], cwd=path, check=True, capture_output=True,
                              text=True).stdout.strip()
    path.mkdir()
    git("init", "-q", "-b", "main")
    for i, title in enumerate(titles):
        (path / "behaviour").write_text("old\n" if i < transition else "new\n")
        git("add", "behaviour")
        git("-c", "user.name=Dev", "-c", "user.email=d@x", "commit", "-q", "--allow-empty",
            "-m", title)
    return git("rev-list", "--reverse", "main").split()


def test_the_report_quotes_titles_and_scripts_as_they_are(tmp_path, run_cli):
    """The path scrubber turned `</script>` into `&lt;…/script&gt;`, "/O2" into "…/O2" and
    the test's `>> /tmp/x/ts` into `…/ts`; markdown in a title rendered live."""
    title = "**bold** [link](http://x.org) </script> built with /O2"
    _titled_repo(tmp_path / "r", ["a", "b", "c", title, "e", "f"], 3)
    log = tmp_path / "x" / "ts"
    log.parent.mkdir()
    test = f'echo run >> {log}; test "$(cat behaviour)" = old'
    code, _, _ = run_cli(["bisect", "--repo", tmp_path / "r", "--old", "main~5",
                          "--new", "main", "--test", test, "--state", tmp_path / "st",
                          "--quiet"])
    assert code == 0
    code, out, _ = run_cli(["report", "--state", tmp_path / "st", "-o", "-"])
    assert code == 0 and out.startswith("#") and not (Path.cwd() / "-").exists()
    assert r"\*\*bold\*\* \[link\](http://x.org) &lt;/script&gt; built with /O2" in out
    assert f"echo run >> {log};" in out          # the test, runnable as printed


def _merged_repo(r) -> tuple[str, str, str]:
    """main: a, b, c, main work (old), a merge of a side branch (from b) whose second commit
    makes the change, then one more commit. Returns (the side's first commit, the change, the merge)."""
    def git(*args):
        return subprocess.run(["git", "-c", "user.name=D", "-c", "user.email=d@x", *args],
                              cwd=r, check=True, capture_output=True, text=True).stdout.strip()
    _titled_repo(r, ["a", "b", "c"], 9)                     # all old
    git("checkout", "-q", "-b", "side", "main~1")
    (r / "unrelated").write_text("x\n")
    git("add", "unrelated")
    git("commit", "-q", "-m", "side work")
    first = git("rev-parse", "HEAD")
    (r / "behaviour").write_text("new\n")
    git("commit", "-q", "-am", "side: the change")
    side = git("rev-parse", "HEAD")
    git("checkout", "-q", "main")
    (r / "main.txt").write_text("x\n")
    git("add", "main.txt")
    git("commit", "-q", "-m", "main work")
    git("merge", "-q", "--no-ff", "-m", "Merge pull request #7 from x/side", "side")
    merge = git("rev-parse", "HEAD")
    git("commit", "-q", "--allow-empty", "-m", "after")
    return first, side, merge


@pytest.mark.slow
def test_a_merge_on_the_path_is_descended_into_as_git_bisect_would(tmp_path, run_cli):
    """The first-parent answer is a merge: the branch it merged is bisected with the same
    machinery, and the answer is the branch's commit (git bisect without --first-parent
    finds the same). --no-descend stops at the merge, saying how to look inside."""
    _, side, merge = _merged_repo(tmp_path / "r")
    line = ["bisect", "--repo", tmp_path / "r", "--old", "main~3", "--new", "main",
            "--test", 'test "$(cat behaviour)" = old', "--state", tmp_path / "st", "--json"]
    code, out, err = run_cli(line)
    told = json.loads(out)
    assert code == 0 and told["first_new"] == side, told
    assert [d["merge"] for d in told["descents"]] == [merge] and told["descents"][0]["found"] == side
    assert "a merge: bisecting the branch" in err and told["session"] != told["descents"][0]["session"]
    report = Path(told["report"]).read_text()
    assert "## Merges looked into" in report and f"(`{side}`)" in report
    code, out, _ = run_cli([*line, "--no-descend", "--quiet"])
    told = json.loads(out)
    assert code == 0 and told["first_new"] == merge and told["first_new_pr"] == 7
    assert told["descents"] == []
    code, out, _ = run_cli([*line[:-1], "--no-descend", "--quiet"])
    assert "It is a merge" not in out and merge in out


def test_a_merge_whose_branch_alone_behaves_old_keeps_the_merge_as_the_answer(tmp_path,
                                                                             run_cli):
    """The change needs both sides: the branch's tip alone behaves the old way. The merge
    stays the answer, with what the branch showed and the command to look again."""
    first, side, merge = _merged_repo(tmp_path / "r")
    test = 'test "$(cat behaviour)" = old || ! test -e main.txt'     # needs main's side too
    code, out, _ = run_cli(["bisect", "--repo", tmp_path / "r", "--old", "main~3", "--new",
                            "main", "--test", test, "--state", tmp_path / "st", "--quiet"])
    assert code == 0 and merge in out and "It is a merge, and stays the answer" in out
    assert "invalid-endpoints" in out and "--old " in out


def test_a_max_skips_stop_names_a_probe_that_runs_and_untested_commits_as_such(tmp_path,
                                                                             run_cli):
    make_repo(tmp_path / "r", 40, 25, set(range(5, 35)))
    code, out, _ = run_cli(["bisect", "--repo", tmp_path / "r", "--old", "main~39",
                            "--new", "main", "--build", BUILD, "--test", TEST, "--state",
                            tmp_path / "st", "--max-skips", "2", "--quiet", "--json"])
    told = json.loads(out)
    assert code == 4 and "--max-skips" in told["explanation"]
    probe = told["explanation"].split("`")[1]
    assert "--test" in probe and "--build" in probe and probe.startswith("bisect-ngc probe")
    report = Path(told["report"]).read_text()
    assert "the first new-behaviour commit tested" not in report
    assert "not tested (the search stopped before it)" in report


@pytest.mark.slow
def test_a_probe_without_a_build_is_not_called_a_build(tmp_path, run_cli):
    make_repo(tmp_path / "r", 12, 6)
    code, out, _ = run_cli(["bisect", "--repo", tmp_path / "r", "--old", "main~11",
                            "--new", "main", "--test", 'test "$(cat behaviour)" = old',
                            "--state", tmp_path / "st", "--quiet", "--json"])
    report = Path(json.loads(out)["report"]).read_text()
    assert code == 0 and "the commit's worktree (no build) on this host" in report
    assert "build wheel" not in report and "| test only |" in report


@pytest.mark.slow
def test_a_huge_log_keeps_its_start_and_its_end(tmp_path, run_cli):
    """Logs had no cap: 100 MB per run were kept. Past the cap the middle goes; the end,
    with the errors and the test's JSON line, stays."""
    make_repo(tmp_path / "r", 6, 3)
    test = ('head -c 20000000 /dev/zero | tr "\\0" x; echo; echo \'{"said": "the end"}\'; '
            'test "$(cat behaviour)" = old')
    code, out, _ = run_cli(["bisect", "--repo", tmp_path / "r", "--old", "main~5",
                            "--new", "main", "--test", test, "--state", tmp_path / "st",
                            "--quiet", "--json", "--verify", "0"])
    assert code == 0
    logs = list((tmp_path / "st" / "logs").rglob("test-1.log"))
    assert logs and all(p.stat().st_size <= 16 << 20 for p in logs)
    text = logs[0].read_text()
    assert "bytes of this log cut" in text and text.rstrip().endswith('{"said": "the end"}')


def test_a_script_beside_a_subdirectory_cwd_is_warned_about(tmp_path, run_cli, monkeypatch):
    """From repo/sub, `--test ./t.sh` names sub/t.sh, but the test runs at the top of
    each worktree (git bisect run would run it in sub/)."""
    import subprocess as sp
    make_repo(tmp_path / "r", 20, 13)
    (tmp_path / "r" / "sub").mkdir()
    (tmp_path / "r" / "sub" / "t.sh").write_text("#!/bin/sh\nexit 0\n")
    sp.run(["git", "-C", str(tmp_path / "r"), "add", "sub/t.sh"], check=True)
    monkeypatch.chdir(tmp_path / "r" / "sub")
    code, _, err = run_cli(_bisect(".", tmp_path / "st", "./t.sh", "--dry-run"))
    assert code == 0 and "which is in sub/" in err


@pytest.mark.slow
def test_a_test_killed_by_a_signal_stops_the_bisection_too(tmp_path, run_cli):
    """A test that kills itself (the shell execs it) returns -11, not 139: no verdict."""
    make_repo(tmp_path / "r", 20, 13)
    test = ('v=$(cat version.txt); if [ $v -ge 7 ] && [ $v -le 12 ]; then exec python3 -c '
            '"import os; os.kill(os.getpid(), 11)"; fi; test "$(cat behaviour)" = old')
    code, out, err = run_cli(_bisect(tmp_path / "r", tmp_path / "st", test))
    assert code == 2 and "killed by signal 11" in _one_json_value(out)["message"]


@pytest.mark.parametrize("code,ms,crashed", [(124, 60000, None), (137, 60500, None),
                                             (137, 3000, 137), (139, 60000, 139)])
def test_a_slurm_test_killed_after_its_timeout_is_a_timeout_not_a_crash(tmp_path, code, ms,
                                                                        crashed):
    """`timeout -k` exits 137 when the test outlived its TERM: --timeout's skip, never a
    crash that stops the bisection; a 137 well inside the limit (an OOM kill) and 139 (a
    segfault) are crashes."""
    from bisect_ngc.backends.slurm.results import read_result
    from bisect_ngc.core.records import SlurmJob
    from bisect_ngc.core.search import RepeatPolicy
    (tmp_path / "result-0.json").write_text(json.dumps(
        {"codes": [code], "ms": [ms], "node": "n1", "timeout_code": 124}))
    out = read_result(tmp_path, SlurmJob("k", "r", 0), RepeatPolicy.ANY, build_limit=None,
                      test_limit=60.0)
    assert out.crashed == crashed and out.verdict.value == "skip"


def test_a_merge_that_brings_in_nothing_new_is_not_descended_into(tmp_path, run_cli):
    """A merge whose second parent is already an ancestor of its first (merged twice,
    `-s ours`): no branch to walk, so the merge is the answer (it once crashed)."""
    r = tmp_path / "r"
    _titled_repo(r, ["a", "b", "c"], 9)

    def git(*args):
        return subprocess.run(["git", "-c", "user.name=D", "-c", "user.email=d@x", *args],
                              cwd=r, check=True, capture_output=True, text=True).stdout.strip()
    (r / "behaviour").write_text("new\n")
    git("add", "behaviour")
    merge = git("commit-tree", git("write-tree"), "-p", "HEAD", "-p", "HEAD~1", "-m", "again")
    git("reset", "-q", "--hard", merge)
    code, out, _ = run_cli(["bisect", "--repo", r, "--old", "main~2", "--new", "main",
                            "--test", 'test "$(cat behaviour)" = old', "--state",
                            tmp_path / "st", "--quiet", "--json"])
    told = json.loads(out)
    assert code == 0 and told["first_new"] == merge and told["descents"] == []


@pytest.mark.slow
def test_a_descent_stopped_by_a_crash_resumes_with_the_same_command(tmp_path, run_cli):
    """The branch's middle commit crashes the test: the run stops (exit 2), the outer
    session is kept unfinished, and once fixed the same command resumes it (no new
    outer session, nothing measured again) and finishes the descent."""
    from bisect_ngc.core.store import Store
    _, side, merge = _merged_repo(tmp_path / "r")
    flag = tmp_path / "broken"
    flag.write_text("")
    # A glob, not the path: a file the test names is keyed, and removing it would ask
    # another question (a new session), not resume this one.
    test = (f'ls {tmp_path}/broke[n] >/dev/null 2>&1 && [ "$(git log -1 --format=%s)" = '
            '"side work" ] && exit 200; test "$(cat behaviour)" = old')
    line = ["bisect", "--repo", tmp_path / "r", "--old", "main~3", "--new", "main", "--test",
            test, "--state", tmp_path / "st", "--quiet", "--json"]
    code, out, _ = run_cli(line)
    assert code == 2 and "exited 200" in json.loads(out)["message"]
    store = Store(tmp_path / "st")
    outer = [s for s in store.sessions() if s.candidates[-1] != side]
    assert [s.status.value for s in outer] == ["interrupted"]
    flag.unlink()
    code, out, _ = run_cli(line)
    assert code == 0 and json.loads(out)["first_new"] == side
    assert len([s for s in Store(tmp_path / "st").sessions()
                if s.candidates[-1] != side]) == 1


def test_a_test_beside_the_checkout_draws_a_warning_not_a_traceback(tmp_path, run_cli,
                                                                    monkeypatch):
    make_repo(tmp_path / "r", 20, 13)
    (tmp_path / "t.sh").write_text("#!/bin/sh\nexit 0\n")
    monkeypatch.chdir(tmp_path / "r")
    code, _, err = run_cli(_bisect(".", tmp_path / "st", "bash ../t.sh", "--dry-run"))
    assert code == 0 and "Traceback" not in err
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(_bisect("r", tmp_path / "st", "./t.sh", "--dry-run"))
    assert code == 0 and "where you started, outside the checkout" in err
