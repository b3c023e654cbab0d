"""A memory you can trust (issue 47): state that never binds to one clone, keys that see
what the build and test read, builds done once, a memory that can be corrected, and
several sessions at once. Each finding of the issue is a test here, through the real CLI
on real git repositories the tests make."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bisect_ngc.core.filesystems import filesystem_type, on_network
from bisect_ngc.core.recipes import Recipe
from bisect_ngc.core.store import Store
from tests.lib.repos import BUILD, TEST, make_repo


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def bisect(repo: Path, state: Path, old: str, new: str, *extra: str, test: str = TEST,
           build: str = BUILD) -> list[str]:
    return ["bisect", "--repo", str(repo), "--old", old, "--new", new, "--build", build,
            "--test", test, "--state", str(state), "--quiet", "--json", *extra]


def answer(run_cli, argv) -> tuple[int, dict]:
    code, out, err = run_cli(argv)
    return code, json.loads(out)


# --- 1. worktrees that belong to the tool ------------------------------------------------

@pytest.mark.slow
def test_forks_and_a_deleted_first_clone_never_break_a_bisection(tmp_path, run_cli):
    """Bisect in fork-a; commit on a branch in fork-b and bisect up to it with the same
    state; delete fork-a; bisect a third clone: every answer is right."""
    shas = make_repo(tmp_path / "origin", 40, 25)
    for name in ("fork-a", "fork-b", "fork-c"):
        git(tmp_path, "clone", "-q", str(tmp_path / "origin"), name)
    state = tmp_path / "st"
    code, res = answer(run_cli, bisect(tmp_path / "fork-a", state, "main~39", "main"))
    assert code == 0 and res["first_new"] == shas[25]

    fork_b = tmp_path / "fork-b"
    git(fork_b, "checkout", "-q", "-b", "local", shas[10])
    for k in range(6):                     # a local change of behaviour at the third commit
        (fork_b / "behaviour").write_text("new\n" if k >= 2 else "old\n")
        (fork_b / "local.txt").write_text(f"{k}\n")
        git(fork_b, "add", "-A")
        git(fork_b, "commit", "-q", "-m", f"local {k}")
    local = git(fork_b, "rev-list", "--reverse", f"{shas[10]}..local").split()
    code, res = answer(run_cli, bisect(fork_b, state, shas[10], "local"))
    assert code == 0 and res["first_new"] == local[2], res

    shutil.rmtree(tmp_path / "fork-a")
    code, res = answer(run_cli, bisect(tmp_path / "fork-c", state, "main~39", "main~1"))
    assert code == 0 and res["first_new"] == shas[25], res
    homes = list((state / "worktrees").glob("*/home.git"))
    lent = (homes[0] / "objects" / "info" / "alternates").read_text().split()
    assert lent[0] == str((tmp_path / "fork-c" / ".git" / "objects").resolve())
    assert all(Path(p).is_dir() for p in lent)        # the deleted clone is dropped


# --- 2. keys that see the host ------------------------------------------------------------

RUNNERS = ["pytest -q {t}.py", "python3 -m pytest {t}.py", "torchrun --nproc_per_node 2 {t}.py",
           "mpirun -np 2 python3 {t}.py", "srun -n1 {t}.sh", "numactl --cpunodebind=0 {t}.sh",
           "taskset -c 0 {t}.sh", "nice -n 5 {t}.sh", "make -C {d} check",
           "python3 -X dev {t}.py", "cd {d} && ./t.sh", "uv run {t}.py",
           "bash {t}.sh --config={d}/conf.yaml", "sh {d}/outer.sh", "sh {d}/idioms.sh",
           "pytest -q {d}/tests", "bash -c '{t}.sh --fast'", "make -C{d} check",
           "srun --chdir={d} ./t.sh", "python3 {d}/main.py"]


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_file_named_anywhere_in_the_test_is_keyed_by_its_content(tmp_path, runner):
    d = tmp_path / "abs"
    d.mkdir()
    (d / "tests").mkdir()
    files = {"t.py": "pass\n", "t.sh": "exit 0\n", "Makefile": "check:\n\ttrue\n",
             "conf.yaml": "a: 1\n", "env.sh": "X=1\n", "outer.sh": ". ./env.sh\nexit 0\n",
             "idioms.sh": 'HERE="$(cd "$(dirname "$0")" && pwd)"\n. "$HERE/env2.sh"\n'
                          'python3 "$(dirname "$0")/t.py"\n', "env2.sh": "Y=1\n",
             "tests/test_x.py": "def test_x(): pass\n", "main.py": "import helper\n",
             "helper.py": "X = 1\n"}
    for name, text in files.items():
        (d / name).write_text(text)
    test = runner.format(t=d / "t", d=d)
    edited = {"make -C": "Makefile", "--config": "conf.yaml", "outer.sh": "env.sh",
              "idioms.sh": "env2.sh", "tests": "tests/test_x.py", "main.py": "helper.py"}
    name = next((f for key, f in edited.items() if key in runner),
                "t.py" if ".py" in test else "t.sh")
    for build in (False, True):          # --build is keyed the same way
        def key() -> str:
            r = Recipe(build=test if build else None, test="true" if build else test)
            return r.build_key() if build else r.test_key()
        first = key()
        (d / name).write_text(files[name] + "# edited\n")
        assert key() != first, (runner, name, build)
        (d / name).write_text(files[name])
        assert key() == first


@pytest.mark.parametrize("writes", ["echo 1 >> {f}; echo 2 > {f}", "python3 {t} --log {f}",
                                    "pytest -q {t} --junitxml={f}", "make | tee -a {f}",
                                    "cc -o {f} x.c", "python3 {t} --output={f}"])
def test_a_file_the_test_writes_is_not_keyed_but_one_it_reads_is(tmp_path, writes):
    log, data, script = tmp_path / "log", tmp_path / "data", tmp_path / "t.py"
    log.write_text("x")
    data.write_text("1")
    script.write_text("pass\n")
    writes = Recipe(build=None, test=writes.format(f=log, t=script))
    first = writes.test_key()
    log.write_text("y")
    assert writes.test_key() == first
    reads = Recipe(build=None, test=f"grep -q 1 {data}")
    first = reads.test_key()
    data.write_text("2")
    assert reads.test_key() != first


def test_a_variable_the_command_names_is_keyed_on_this_host_and_key_env_adds_others(
        tmp_path, monkeypatch):
    monkeypatch.setenv("LIMIT", "5")
    monkeypatch.setenv("MODE", "a")
    named = Recipe(build=None, test='test "$LIMIT" -gt 3')
    in_image = Recipe(build=None, test='test "$LIMIT" -gt 3', image="img")
    unnamed = Recipe(build=None, test="python3 -c 'import os; os.environ[\"MODE\"]'")
    asked = Recipe(build=None, test=unnamed.test, key_env=("MODE",))
    before = [r.test_key() for r in (named, in_image, unnamed, asked)]
    monkeypatch.setenv("LIMIT", "1")
    monkeypatch.setenv("MODE", "b")
    after = [r.test_key() for r in (named, in_image, unnamed, asked)]
    # keyed on this host; in a container the host's value does not reach the test;
    # unnamed: not keyed unless --key-env names it
    assert [b != a for b, a in zip(before, after)] == [True, False, False, True]


def test_what_a_scheduler_or_terminal_sets_per_job_and_comments_are_not_keyed(
        tmp_path, monkeypatch):
    script = tmp_path / "t.sh"
    script.write_text("# mentions $IN_A_COMMENT\necho $SLURM_JOB_ID $TERM $CUDA_VISIBLE_DEVICES\n")
    r = Recipe(build=None, test=f"sh {script}")
    monkeypatch.setenv("SLURM_JOB_ID", "101")
    monkeypatch.setenv("IN_A_COMMENT", "a")
    first = r.test_key()
    monkeypatch.setenv("SLURM_JOB_ID", "102")     # a requeued controller resumes
    monkeypatch.setenv("IN_A_COMMENT", "b")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert r.test_key() == first
    monkeypatch.setenv("CC", "clang")              # the toolchain is keyed on this host
    assert r.test_key() != first


@pytest.mark.slow
def test_a_keyed_file_the_run_changes_is_said_not_silently_a_new_question(tmp_path, run_cli):
    make_repo(tmp_path / "r", 12, 7)
    out = tmp_path / "result.txt"
    out.write_text("")
    test = f'cp "$BISECT_ARTIFACTS/out" {out}.tmp && mv {out}.tmp {out}; ' \
           f'test "$(cat {out})" = old'
    code, _, err = run_cli(bisect(tmp_path / "r", tmp_path / "st", "main~11", "main",
                                  test=test))
    assert code == 0 and f"warning: {out} changed while the bisection ran" in err


@pytest.mark.slow
def test_edits_of_a_build_script_and_of_a_sourced_file_are_built_and_probed_again(
        tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 20, 13)
    build, env = tmp_path / "build.sh", tmp_path / "env.sh"
    env.write_text("OUT=out\n")
    build.write_text(f'. {env}\ntest ! -e broken && cp behaviour "$BISECT_ARTIFACTS/$OUT"\n')
    test = 'test "$(cat "$BISECT_ARTIFACTS/out")" = old'
    argv = bisect(tmp_path / "r", tmp_path / "st", "main~19", "main", test=test,
                  build=f"sh {build}")
    code, res = answer(run_cli, argv)
    assert code == 0 and res["first_new"] == shas[13]
    env.write_text("OUT=elsewhere\n")          # every build now misses `out`: every commit fails
    code, res = answer(run_cli, argv)
    assert code == 3 and res["cached"] == 0 and res["builds"] == 2, res


@pytest.mark.slow
def test_a_changed_variable_is_probed_again_through_the_cli(tmp_path, run_cli, monkeypatch):
    shas = make_repo(tmp_path / "r", 20, 13)
    test = 'test "$(cat "$BISECT_ARTIFACTS/out")" = "$WANT"'
    argv = bisect(tmp_path / "r", tmp_path / "st", "main~19", "main", test=test)
    monkeypatch.setenv("WANT", "old")
    code, res = answer(run_cli, argv)
    assert code == 0 and res["first_new"] == shas[13]
    monkeypatch.setenv("WANT", "new")          # the other way round now: a fix is found
    code, res = answer(run_cli, argv)
    assert code == 0 and res["cached"] == 0 and res["first_new"] == shas[13]
    assert (res["old_outcome"], res["new_outcome"]) == ("fail", "pass")


@pytest.mark.slow
def test_a_stale_cached_verdict_is_named_as_such_not_as_a_flaky_test(tmp_path, run_cli,
                                                                     monkeypatch):
    """A program reads MODE without the command naming it: the second session starts from
    stale runs, its fresh runs outweigh them (the belief corrects itself), and the words
    say the cache may be stale and what to do."""
    shas = make_repo(tmp_path / "r", 20, 13)
    script = tmp_path / "t.py"
    script.write_text("import os, sys\nout = open(os.environ['BISECT_ARTIFACTS'] + '/out')"
                      ".read().strip()\nsys.exit((out == 'old') == (os.environ['MODE'] == 'a'))\n")
    argv = bisect(tmp_path / "r", tmp_path / "st", "main~19", "main",
                  test=f"{sys.executable} {script}")
    monkeypatch.setenv("MODE", "b")
    assert answer(run_cli, argv)[0] == 0
    monkeypatch.setenv("MODE", "a")
    code, out, _ = run_cli([a for a in argv if a != "--json"])
    assert code == 0 and shas[13] in out                   # MODE a: a fix at the same commit
    assert "may be stale" in out and "bisect-ngc forget" in out
    code, res = answer(run_cli, argv)                       # the stale runs are outweighed now
    assert code == 0 and res["first_new"] == shas[13] and "stale" not in res["belief"]
    code, res = answer(run_cli, argv + ["--key-env", "MODE"])    # keyed: probed afresh
    assert code == 0 and res["cached"] == 0


# --- 5. a build is done once --------------------------------------------------------------

@pytest.mark.slow
def test_a_build_is_done_once_per_commit_and_its_worktree_files_come_back(tmp_path, run_cli,
                                                                          monkeypatch):
    shas = make_repo(tmp_path / "r", 40, 25)
    builds = tmp_path / "builds"
    monkeypatch.setenv("BUILDS", str(builds))
    build = ('echo "$BISECT_COMMIT" >> "$BUILDS"; test ! -e broken && '
             'cp behaviour built-here.txt')             # in place, as `build_ext --inplace`
    test = 'test "$(cat built-here.txt)" = old'
    argv = bisect(tmp_path / "r", tmp_path / "st", "main~39", "main", test=test, build=build)
    code, res = answer(run_cli, argv)
    built = builds.read_text().split()
    assert code == 0 and res["first_new"] == shas[25]
    assert len(built) == len(set(built)) == res["builds"]     # repeated runs built nothing
    code, res = answer(run_cli, argv)                         # the same command again
    assert code == 0 and builds.read_text().split() == built
    code, res = answer(run_cli, argv[:argv.index("--test") + 1] + [test + " && true"] +
                       argv[argv.index("--test") + 2:])       # a changed --test
    assert code == 0 and res["first_new"] == shas[25] and res["cached"] == 0
    assert builds.read_text().split() == built and res["builds"] == 0
    code, res = answer(run_cli, argv + ["--rebuild"])
    assert code == 0 and len(builds.read_text().split()) == len(built) + res["probes"]


KEPT_CASES = {
    "a symlink to a directory": ("mkdir -p out && cp behaviour out/b && ln -sfn out cur",
                                 'test "$(cat cur/b)" = old'),
    "an empty directory": ("mkdir -p results && cp behaviour \"$BISECT_ARTIFACTS/out\"",
                           'cp "$BISECT_ARTIFACTS/out" results/b && test "$(cat results/b)" = old'),
    "a deleted tracked file": ('rm version.txt && cp behaviour "$BISECT_ARTIFACTS/out"',
                               'test ! -e version.txt && test "$(cat "$BISECT_ARTIFACTS/out")" = old'),
    "an edited tracked file": ("cp behaviour version.txt", 'test "$(cat version.txt)" = old'),
    "its own path in a file": ('printf "cat %s/behaviour\\n" "$PWD" > show.sh',
                               'test "$(sh show.sh)" = old'),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(KEPT_CASES))
def test_a_kept_build_comes_back_as_the_build_left_it(tmp_path, run_cli, case):
    """The first session builds; the second, with another --test and --jobs, runs every
    commit on kept builds (in other slots too), unchecked (--verify 0): each verdict must
    be the fresh build's."""
    build, test = KEPT_CASES[case]
    shas = make_repo(tmp_path / "r", 16, 9)
    argv = bisect(tmp_path / "r", tmp_path / "st", "main~15", "main", test=test, build=build)
    code, res = answer(run_cli, argv)
    assert code == 0 and res["first_new"] == shas[9], res
    again = argv[:argv.index("--test") + 1] + [test + " && true"] + \
        argv[argv.index("--test") + 2:] + ["--verify", "0", "--jobs", "2"]
    code, res = answer(run_cli, again)
    assert code == 0 and res["first_new"] == shas[9] and res["cached"] == 0, res


@pytest.mark.slow
def test_a_build_that_installs_elsewhere_is_told_to_rebuild(tmp_path, run_cli):
    make_repo(tmp_path / "r", 16, 9)
    inst = tmp_path / "inst"
    build = f'mkdir -p {inst} && cp behaviour {inst}/b'
    test = f'test "$(cat {inst}/b)" = old'
    argv = bisect(tmp_path / "r", tmp_path / "st", "main~15", "main", test=test, build=build)
    code, res = answer(run_cli, argv)
    assert code in (3, 4) and res["status"] != "found" and \
        "pass --rebuild" in res["explanation"], res
    code, res = answer(run_cli, argv + ["--rebuild"])
    assert code == 0 and res["status"] == "found"


@pytest.mark.slow
def test_a_build_that_cannot_be_kept_is_said_and_the_answer_stands(tmp_path, run_cli,
                                                                    monkeypatch):
    shas = make_repo(tmp_path / "r", 16, 9)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr("bisect_ngc.core.kept_builds.tarfile.open", full)
    argv = bisect(tmp_path / "r", tmp_path / "st", "main~15", "main",
                  build="cp behaviour built.txt", test='test "$(cat built.txt)" = old')
    code, out, err = run_cli(argv)
    assert code == 0 and json.loads(out)["first_new"] == shas[9]
    assert "is not kept (could not keep it: No space left on device)" in err
    assert not list((tmp_path / "st" / "artifacts").glob("*/*.kept.json"))
    assert not [p for p in (tmp_path / "st" / "artifacts").glob("*/*") if p.suffix.isdigit()
                or p.name.split(".")[-1].isdigit()]


def test_a_test_holds_its_build_and_an_interruption_does_not_wait(tmp_path):
    from bisect_ngc.core.kept_builds import KeptBuild
    kept = KeptBuild(tmp_path / "bk" / "c0ffee")
    with kept.locked(exclusive=False):
        with kept.locked(exclusive=False):            # tests share it
            pass
        start = time.monotonic()
        with pytest.raises(InterruptedError):         # a build waits, until interrupted
            with kept.locked(exclusive=True, stop=lambda: time.monotonic() - start > 0.3):
                pass


@pytest.mark.slow
def test_a_rebuild_in_another_session_waits_for_a_running_test(tmp_path):
    shas = make_repo(tmp_path / "r", 12, 7)
    st = tmp_path / "st"
    slow = 'sleep 0.5; test "$(cat "$BISECT_ARTIFACTS/out")" = old'
    a = _spawn(bisect(tmp_path / "r", st, "main~11", "main", test=slow))
    time.sleep(0.3)
    b = _spawn(bisect(tmp_path / "r", st, "main~11", "main", "--rebuild",
                      test=slow + " && true"))
    results = [(p.communicate(timeout=300), p.returncode) for p in (a, b)]
    assert [rc for _, rc in results] == [0, 0], [err for (_, err), _ in results]
    assert [json.loads(out)["first_new"] for (out, _), _ in results] == [shas[7]] * 2


# --- correcting the memory: forget and gc -------------------------------------------------

@pytest.mark.slow
def test_forget_makes_the_next_run_probe_again(tmp_path, run_cli, monkeypatch):
    """Each session runs its answer's premises fresh; what forget changes is whether a
    commit's first probe comes from the cache."""
    shas = make_repo(tmp_path / "r", 30, 17)
    counter = tmp_path / "counter"
    monkeypatch.setenv("COUNTER", str(counter))
    argv = bisect(tmp_path / "r", tmp_path / "st", "main~29", "main",
                  test='echo "$BISECT_COMMIT" >> "$COUNTER"; ' + TEST)
    st = ["--state", str(tmp_path / "st")]

    def first_probes() -> dict[str, bool]:
        """The last session's commits, each with whether its first probe was cached."""
        code, out, _ = run_cli(["log", *st, "--json"])
        firsts: dict[str, bool] = {}
        for p in json.loads(out):
            firsts.setdefault(p["commit"], p["cached"])
        return firsts

    code, first = answer(run_cli, argv)
    assert code == 0 and first["first_new"] == shas[17]
    tested = set(first_probes())
    code, out, _ = run_cli(["forget", "--commit", shas[17][:8], *st, "--json"])
    done = json.loads(out)
    assert code == 0 and done["cached"] == 1 and len(done["builds"]) == 1
    code, again = answer(run_cli, argv)
    firsts = first_probes()
    assert code == 0 and again["first_new"] == shas[17]
    assert firsts[shas[17]] is False and all(firsts[c] for c in firsts if c != shas[17])
    test = 'echo "$BISECT_COMMIT" >> "$COUNTER"; ' + TEST
    code, out, _ = run_cli(["forget", "--test", test, *st, "--json"])
    assert code == 0 and json.loads(out)["cached"] == len(tested | set(firsts))
    code, again = answer(run_cli, argv)
    assert code == 0 and again["cached"] == 0 and not any(first_probes().values())
    code, out, _ = run_cli(["forget", "--session", again["session"], *st, "--json"])
    assert code == 0 and json.loads(out)["cached"] == len(first_probes())
    code, again = answer(run_cli, argv)
    assert code == 0 and again["cached"] == 0
    code, cached = answer(run_cli, argv)    # from the cache, and the premises run fresh
    used = first_probes()
    assert code == 0 and cached["probes"] == 2 and all(used.values())
    code, out, _ = run_cli(["forget", "--session", cached["session"], *st, "--json"])
    assert code == 0 and json.loads(out)["cached"] == len(used)   # all it used
    code, out, _ = run_cli(["probe", *argv[1:argv.index("--quiet")], "--commit", shas[3]])
    code, out, _ = run_cli(["forget", "--commit", shas[3], *st, "--json"])
    assert code == 0 and len(json.loads(out)["builds"]) == 1    # a kept build alone
    for bad, words in ((["--commit", "ffff"], "not in this state"),
                       (["--commit", "xyz"], "not a commit sha"), ([], "say what to forget"),
                       (["--test", "nope"], "no session")):
        code, _, err = run_cli(["forget", *bad, *st])
        assert code == 2 and words in err and "hint:" in err
    code, _, err = run_cli(["forget", "--commit", shas[3], "--state", tmp_path / "typo"])
    assert code == 2 and not (tmp_path / "typo").exists()


@pytest.mark.parametrize("keep", [".", "./", ".git", "/abs", "../up"])
def test_a_keep_path_must_be_inside_the_worktree_and_not_all_of_it(tmp_path, run_cli, keep):
    make_repo(tmp_path / "r", 6, 3)
    code, _, err = run_cli(bisect(tmp_path / "r", tmp_path / "st", "main~5", "main",
                                  "--keep", keep))
    assert code == 2 and "--keep" in err


def test_gc_never_removes_a_lane_a_process_holds(tmp_path):
    from bisect_ngc.vcs.worktrees import lanes, remove_lane, take_lane
    base = tmp_path / "wt" / "proj"
    k, fd = take_lane(base)
    (base / f"lane-{k}" / "slot-0").mkdir(parents=True)
    lane, = lanes(base)
    assert lane.in_use and not remove_lane(lane) and (base / f"lane-{k}").is_dir()
    os.close(fd)
    assert remove_lane(lanes(base)[0]) and not (base / f"lane-{k}").exists()


@pytest.mark.slow
def test_gc_removes_free_worktrees_and_leaves_a_running_sessions(tmp_path, run_cli):
    make_repo(tmp_path / "r", 30, 17)
    st = tmp_path / "st"
    proc = _spawn(bisect(tmp_path / "r", st, "main~29", "main", test="sleep 0.3; " + TEST))
    try:
        _wait_for(lambda: list(st.glob("worktrees/*/lane-0/slot-0")))
        code, res = answer(run_cli, bisect(tmp_path / "r", st, "main~29", "main~2",
                                           "--jobs", "3"))
        assert code == 0 and len(list(st.glob("worktrees/*/lane-1/slot-*"))) == 3
        code, out, _ = run_cli(["gc", "--state", st, "--json"])
        lanes = {Path(r["path"]).name: r for r in json.loads(out)}
        assert code == 0 and lanes["lane-1"]["removed"] and not lanes["lane-0"]["removed"]
        assert lanes["lane-0"]["in_use"] and not list(st.glob("worktrees/*/lane-1"))
    finally:
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err


# --- 3. several sessions at once ----------------------------------------------------------

def _spawn(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bisect_ngc", *map(str, argv)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(ready, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < end, "never got going"
        time.sleep(0.05)


@pytest.mark.slow
def test_two_ranges_and_two_repositories_run_at_once_on_one_state(tmp_path):
    a = make_repo(tmp_path / "a", 60, 31)
    b = make_repo(tmp_path / "b", 40, 9)
    st = tmp_path / "st"
    slow = 'sleep 0.2; ' + TEST
    procs = [_spawn(bisect(tmp_path / "a", st, "main~59", "main", test=slow)),
             _spawn(bisect(tmp_path / "a", st, "main~59", "main~10", test=slow)),
             _spawn(bisect(tmp_path / "b", st, "main~39", "main", test=slow))]
    results = [(p.communicate(timeout=300), p.returncode) for p in procs]
    assert [rc for _, rc in results] == [0, 0, 0], [err for (_, err), _ in results]
    found = [json.loads(out)["first_new"] for (out, _), _ in results]
    assert found == [a[31], a[31], b[9]]
    same = _spawn(bisect(tmp_path / "a", st, "main~59", "main", test='sleep 1; ' + TEST))
    try:
        _wait_for(lambda: list(st.glob("locks/*.lock")) and any(
            (p.read_text() or "").split()[:1] == [str(same.pid)] for p in st.glob("locks/*.lock")))
        twice = _spawn(bisect(tmp_path / "a", st, "main~59", "main", test='sleep 1; ' + TEST))
        _, err = twice.communicate(timeout=60)
        assert twice.returncode == 2 and f"already running in pid {same.pid} (session" in err
    finally:
        same.send_signal(signal.SIGINT)
        same.communicate(timeout=60)


# --- 4. a network filesystem --------------------------------------------------------------

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:35 / /home rw,relatime shared:20 - nfs4 server:/home rw,vers=4.2
41 22 0:36 / /lustre/my\\040scratch rw - lustre 10.0.0.1@tcp:/fs rw,flock
"""


def test_the_filesystem_under_a_path_is_read_from_the_mount_table(tmp_path):
    assert filesystem_type(Path("/home/me/.local/state/x"), MOUNTINFO) == "nfs4"
    assert filesystem_type(Path("/lustre/my scratch/st"), MOUNTINFO) == "lustre"
    assert filesystem_type(Path("/homework"), MOUNTINFO) == "ext4"
    assert on_network(Path("/home/me"), MOUNTINFO) and not on_network(Path("/tmp"), MOUNTINFO)
    assert filesystem_type(tmp_path / "not" / "yet") == filesystem_type(tmp_path)


@pytest.mark.slow
def test_state_on_a_network_filesystem_uses_the_rollback_journal(tmp_path, monkeypatch,
                                                                  run_cli):
    """SQLite's WAL does not work over a network filesystem; on one the store takes the
    rollback journal, and readers still open it read-only. (This machine has no NFS or
    Lustre mount: the mount table's answer is the one thing stood in for.)"""
    assert Store(tmp_path / "local").journal == "WAL"
    monkeypatch.setattr("bisect_ngc.core.store.on_network", lambda path: True)
    shas = make_repo(tmp_path / "r", 20, 13)
    code, res = answer(run_cli, bisect(tmp_path / "r", tmp_path / "st", "main~19", "main"))
    assert code == 0 and res["first_new"] == shas[13]
    store = Store(tmp_path / "st")
    assert store.journal == "DELETE"
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert not (tmp_path / "st" / "state.db-wal").exists()
    code, out, _ = run_cli(["status", "--state", tmp_path / "st", "--json"])
    assert code == 0 and json.loads(out)[0]["status"] == "found"


SSHFS = Path(os.environ.get("BISECT_NGC_SSHFS", "/mnt/bisect-ngc-sshfs"))


@pytest.mark.slow
@pytest.mark.skipif(filesystem_type(SSHFS) != "fuse.sshfs",
                    reason=f"no sshfs mount at {SSHFS}: run scripts/sshfs-up.sh (as root)")
def test_a_state_on_a_real_network_filesystem_takes_the_rollback_journal(tmp_path, run_cli):
    """sshfs on loopback is a real network filesystem (FUSE over SFTP): the state, its
    locks and the worktrees live there, and the store runs without WAL."""
    state = SSHFS / f"st-{os.getpid()}-{tmp_path.name}"
    shas = make_repo(tmp_path / "r", 20, 13)
    try:
        code, res = answer(run_cli, bisect(tmp_path / "r", state, "main~19", "main"))
        assert code == 0 and res["first_new"] == shas[13]
        store = Store(state)
        assert store.journal == "DELETE" and not (state / "state.db-wal").exists()
        store.close()
        code, res = answer(run_cli, bisect(tmp_path / "r", state, "main~19", "main"))
        assert code == 0 and res["probes"] == 2 and res["cached"] > 0   # the premises, fresh
    finally:
        shutil.rmtree(state, ignore_errors=True)


# --- 6. smaller things a user reads as broken ---------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("branch", ["fix/café", "修正/分支"])
def test_refs_with_non_ascii_names_are_revisions(tmp_path, run_cli, branch):
    shas = make_repo(tmp_path / "r", 20, 13)
    git(tmp_path / "r", "branch", branch, "main")
    code, res = answer(run_cli, bisect(tmp_path / "r", tmp_path / "st", "main~19", branch))
    assert code == 0 and res["first_new"] == shas[13]


def test_failed_builds_run_no_test_and_are_not_counted_as_runs(tmp_path, run_cli):
    make_repo(tmp_path / "r", 10, 5, unbuildable=set(range(10)))
    code, out, _ = run_cli(bisect(tmp_path / "r", tmp_path / "st", "main~9", "main")[:-1])
    assert code == 3 and "2 probe(s) (0 test run(s)), 2 untestable commit(s)" in out


def test_the_answer_names_the_author_with_the_authors_date(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 20, 13)
    r = tmp_path / "r"
    git(r, "checkout", "-q", "-b", "picked", shas[12])
    git(r, "cherry-pick", shas[13])        # authored at #13's time, committed now
    picked = git(r, "rev-parse", "HEAD")
    code, res = answer(run_cli, bisect(r, tmp_path / "st", shas[12], "picked"))
    assert code == 0 and res["first_new"] == picked
    code, out, _ = run_cli(bisect(r, tmp_path / "st", shas[12], "picked")[:-1])
    authored = git(r, "log", "-1", "--format=%aI", picked)
    assert authored.replace("Z", "+00:00")[:19] in out and "2023-11-14" in out


def test_cache_ls_shows_where_each_backend_keeps_its_builds(tmp_path, run_cli):
    make_repo(tmp_path / "r", 10, 5)
    answer(run_cli, bisect(tmp_path / "r", tmp_path / "st", "main~9", "main"))
    code, out, _ = run_cli(["cache", "ls", "--state", tmp_path / "st", "--cache-dir",
                            tmp_path / "cache"])
    assert code == 0 and str(tmp_path / "st" / "artifacts") in out
    assert str(tmp_path / "cache" / "artifacts") in out and "local" in out


def test_too_many_jobs_and_a_dirty_checkout_are_said(tmp_path, run_cli):
    make_repo(tmp_path / "r", 10, 5)
    (tmp_path / "r" / "version.txt").write_text("edited\n")
    jobs = str((os.cpu_count() or 1) + 1)
    code, _, err = run_cli(bisect(tmp_path / "r", tmp_path / "st", "main~9", "main",
                                  "--jobs", jobs))
    assert code == 0
    assert f"--jobs {jobs} on a host with" in err and "uncommitted changes" in err


def test_diverged_endpoints_get_their_merge_base_and_a_shallow_clone_unshallow(tmp_path,
                                                                              run_cli):
    shas = make_repo(tmp_path / "r", 20, 13)
    r = tmp_path / "r"
    git(r, "checkout", "-q", "-b", "other", shas[5])
    git(r, "commit", "-q", "--allow-empty", "-m", "elsewhere")
    code, _, err = run_cli(bisect(r, tmp_path / "st", "other", "main"))
    assert code == 2 and f"--old {shas[5][:12]}" in err and "swap" not in err
    code, _, err = run_cli(bisect(r, tmp_path / "st", "main", "main~3"))
    assert code == 2 and "swap --old and --new" in err
    git(tmp_path, "clone", "-q", "--depth", "3", "--no-single-branch", f"file://{r}", "shallow")
    code, _, err = run_cli(bisect(tmp_path / "shallow", tmp_path / "st", "origin/other",
                                  "origin/main"))
    assert code == 2 and "git fetch --unshallow" in err, err


@pytest.mark.slow
def test_verdicts_an_older_version_cached_under_a_blind_key_are_misses(tmp_path, run_cli):
    """An older version keyed `python3 -X dev /abs/t.py` by its text alone (it did not
    know that runner's file). Its cached verdicts, made before an edit of t.py, must
    never answer for the new key: the state opens, and every commit is probed again."""
    from bisect_ngc.core.keys import CacheKey, digest
    from bisect_ngc.core.records import ProbeRecord
    from bisect_ngc.core.search import Verdict
    shas = make_repo(tmp_path / "r", 12, 7)
    script = tmp_path / "t.py"
    script.write_text("import os, sys\nsys.exit(open(os.environ['BISECT_ARTIFACTS'] + "
                      "'/out').read().strip() != 'old')\n")
    test = f"python3 -X dev {script}"
    old_test_key = digest({"test": test, "as_is": test, "image": None, "timeout": None,
                           "expect_torch_commit": False, "env": []})   # as 17ce783 wrote it
    recipe = Recipe(build=BUILD, test=test)
    store = Store(tmp_path / "st")
    for i, sha in enumerate(shas):          # what the script said before its edit: reversed
        key = CacheKey(git(tmp_path / "r", "rev-list", "--max-parents=0", "main"), sha,
                       recipe.build_key(), digest([old_test_key, 1, "any"]), f"local:{os.uname()[1]}")
        store.cache_put(key, ProbeRecord(0, i, sha, Verdict.FAIL if i < 7 else Verdict.PASS))
    store.close()
    code, res = answer(run_cli, bisect(tmp_path / "r", tmp_path / "st", "main~11", "main",
                                       test=test))
    assert code == 0 and res["cached"] == 0 and res["first_new"] == shas[7]
    assert (res["old_outcome"], res["new_outcome"]) == ("pass", "fail")
