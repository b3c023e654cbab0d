"""The audit's cases that turned good commits into wrong verdicts, or lost state, without
an error: each with the local backend, real git repositories and real processes."""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.lib.repos import BUILD, TEST, make_repo
from bisect_ngc.core.artifacts import ArtifactStore
from bisect_ngc.core.store import Store


def args_for(repo: Path, state: Path, test: str, *extra) -> list[str]:
    n = len(subprocess.run(["git", "rev-list", "--first-parent", "main"], cwd=repo,
                           capture_output=True, text=True).stdout.split())
    return ["bisect", "--repo", str(repo), "--old", f"main~{n - 1}", "--new", "main",
            "--build", BUILD, "--test", test, "--state", str(state), "--quiet", "--json",
            *extra]


def spawn(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bisect_ngc", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# --- item 3: skips that are not properties of the commit are not cached ---------------------

@pytest.mark.slow
def test_a_transient_skip_is_probed_again_once_its_cause_is_gone(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 20, 13)
    flag = tmp_path / "fixed"
    # Until the flag exists the test dies of a signal, as an OOM kill or a lost GPU would:
    # that stops the bisection as git's does (no verdict is recorded), and the same
    # command goes on once the cause is gone.
    test = f'[ -e {flag} ] || kill -9 $$; ' + TEST
    code, out, _ = run_cli(args_for(tmp_path / "r", tmp_path / "st", test))
    assert code == 2 and "killed by signal 9" in json.loads(out)["message"]
    flag.touch()
    code, out, _ = run_cli(args_for(tmp_path / "r", tmp_path / "st", test))
    assert code == 0 and json.loads(out)["first_new"] == shas[13]


@pytest.mark.slow
def test_a_skip_the_test_asked_for_stays_cached_until_retry_skips(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 20, 13)
    flag = tmp_path / "fixed"       # named by its folder: a file the test names is keyed
    test = f'ls {tmp_path} | grep -qx fixed || exit 125; ' + TEST
    assert run_cli(args_for(tmp_path / "r", tmp_path / "st", test))[0] == 3
    flag.touch()
    code, out, _ = run_cli(args_for(tmp_path / "r", tmp_path / "st", test))
    assert code == 3 and json.loads(out)["cached"] == 2
    code, out, _ = run_cli(args_for(tmp_path / "r", tmp_path / "st", test, "--retry-skips"))
    assert code == 0 and json.loads(out)["first_new"] == shas[13]


# --- item 4: two runs sharing one artifact store ---------------------------------------------

def _publish(root: str, key: str, payload: str, barrier, results) -> None:
    store = ArtifactStore(Path(root))
    with store.staging(key) as staging:
        (staging / "wheel").write_text(payload * 10000)
        barrier.wait()
        art = store.publish(key, staging, {"by": payload})
    results.put((art.path / "wheel").read_text()[:1])


@pytest.mark.parametrize("trial", range(10))
def test_concurrent_builds_of_one_key_both_succeed_and_agree(tmp_path, trial):
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_publish, args=(str(tmp_path), "k" * 24, p, barrier, results))
             for p in "ab"]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    got = [results.get(timeout=5) for _ in procs]
    assert got[0] == got[1] and got[0] in "ab"
    store = ArtifactStore(tmp_path)
    assert [a.key for a in store.entries()] == ["k" * 24]
    assert not list((tmp_path / ".staging").iterdir())


# --- item 9: two runs cloning one URL into one cache dir ------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("trial", range(3))
def test_two_runs_share_one_clone_of_a_url(tmp_path, trial):
    shas = make_repo(tmp_path / "r", 30, 17)
    url = (tmp_path / "r").as_uri()
    procs = [spawn(["bisect", "--repo", url, "--old", "main~29", "--new", "main", "--build",
                    BUILD, "--test", TEST, "--state", tmp_path / f"st{i}", "--cache-dir",
                    tmp_path / "cache", "--quiet", "--json"]) for i in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert json.loads(out)["first_new"] == shas[17]


# --- item 8: tests left running by a killed controller ----------------------------------------

def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (a zombie waiting for init does not)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP])
def test_a_resumed_run_kills_what_a_killed_one_left_running(tmp_path, sig):
    shas = make_repo(tmp_path / "r", 60, 37)
    pids, slow = tmp_path / "pids", tmp_path / "slow"
    slow.touch()
    test = f'echo $$ >> {pids}; if [ -e {slow} ]; then sleep 60; fi; ' + TEST
    args = args_for(tmp_path / "r", tmp_path / "st", test, "--jobs", "2")
    proc = spawn(args)
    end = time.monotonic() + 60
    while not pids.exists() or len(pids.read_text().split()) < 2:
        assert time.monotonic() < end and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    leftovers = [int(p) for p in pids.read_text().split()]
    slow.unlink()
    proc = spawn(args)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out)["first_new"] == shas[37]
    assert not [p for p in leftovers if _group_alive(p)], "a killed run's test still runs"
    if sig == signal.SIGKILL:
        assert "left running by an interrupted run" in err
    logs = list((tmp_path / "st" / "logs").rglob("test-1.log"))
    assert logs and all(log.read_text().count("$ /bin/sh") == 1 for log in logs)


# --- item 11: state that cannot be used -------------------------------------------------------

def _broken_states(tmp_path: Path, run_cli) -> dict[str, Path]:
    make_repo(tmp_path / "r", 8, 4)
    good = tmp_path / "good"
    assert run_cli(args_for(tmp_path / "r", good, TEST))[0] == 0
    cases = {}
    for name, content in (("garbage", b"this is not a database" * 100), ("empty", b"")):
        cases[name] = tmp_path / name
        cases[name].mkdir()
        (cases[name] / "state.db").write_bytes(content)
    cases["truncated"] = tmp_path / "truncated"
    cases["truncated"].mkdir()
    conn = sqlite3.connect(good / "state.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = (good / "state.db").read_bytes()
    (cases["truncated"] / "state.db").write_bytes(data[:len(data) // 3])
    (tmp_path / "a-file").write_text("x")
    cases["is-a-file"] = tmp_path / "a-file"
    cases["under-a-file"] = tmp_path / "a-file" / "state"
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("case,words", [
    ("garbage", "cannot use the state database"), ("empty", "is empty (truncated?)"),
    ("truncated", "state database"), ("is-a-file", "is a file"),
    ("under-a-file", "cannot create the state directory")])
def test_unusable_state_is_one_sentence_and_never_a_fresh_start(tmp_path, run_cli, case,
                                                                 words):
    state = _broken_states(tmp_path, run_cli)[case]
    before = state.read_bytes() if state.is_file() else None
    for argv in (args_for(tmp_path / "r", state, TEST), ["status", "--state", state],
                 ["report", "--state", state]):
        code, out, err = run_cli(argv)
        assert code == 2, (argv[0], out, err)
        assert err.startswith("error: ") and "hint: " in err and "Traceback" not in err
        if argv[0] == "bisect":
            assert words in err, err
    db = state / "state.db"
    if db.exists():
        assert db.stat().st_size == 0 or "sessions" not in db.read_bytes().decode(
            errors="replace") or case == "truncated"
    if before is not None:
        assert state.read_bytes() == before


def _open_store(root: str) -> str:
    try:
        Store(Path(root)).close()
        return "ok"
    except Exception as exc:  # noqa: BLE001 - the test reports what failed
        return str(exc)


@pytest.mark.slow
def test_processes_creating_one_state_at_once_never_see_it_truncated(tmp_path):
    """CI saw one of three sessions read another's new, still empty state.db as truncated."""
    ctx = multiprocessing.get_context("spawn")
    for attempt in range(6):
        root = str(tmp_path / f"st{attempt}")
        with ctx.Pool(6) as pool:
            assert pool.map(_open_store, [root] * 6) == ["ok"] * 6


@pytest.mark.slow
def test_reading_commands_do_not_write_the_state(tmp_path, run_cli):
    make_repo(tmp_path / "r", 12, 6)
    state = tmp_path / "st"
    assert run_cli(args_for(tmp_path / "r", state, TEST))[0] == 0

    def snapshot():
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                for p in state.iterdir() if p.is_file() and p.name.startswith("state.db")}

    before = snapshot()
    for argv in (["status", "--state", state], ["log", "--state", state],
                 ["report", "--state", state, "-o", tmp_path / "out" / "r.md"]):
        assert run_cli(argv)[0] == 0
    assert snapshot() == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere; run as a user to "
                                                 "check an unwritable state directory")
def test_an_unwritable_state_directory_is_a_clear_error(tmp_path, run_cli):
    make_repo(tmp_path / "r", 8, 4)
    (tmp_path / "ro").mkdir(mode=0o500)
    code, _, err = run_cli(args_for(tmp_path / "r", tmp_path / "ro" / "st", TEST))
    assert code == 2 and "cannot create the state directory" in err


# --- item 12 and the low items ----------------------------------------------------------------

@pytest.mark.parametrize("flag,value", [("--timeout", "-5"), ("--timeout", "0"),
                                        ("--build-timeout", "-5")])
def test_timeouts_must_be_positive(tmp_path, run_cli, flag, value):
    make_repo(tmp_path / "r", 8, 4)
    code, _, err = run_cli(args_for(tmp_path / "r", tmp_path / "st", TEST, flag, value))
    assert code == 2 and flag in err and "0" in err


@pytest.mark.slow
def test_a_hanging_build_is_a_skip_after_its_timeout(tmp_path, run_cli):
    make_repo(tmp_path / "r", 8, 4)
    argv = args_for(tmp_path / "r", tmp_path / "st", TEST, "--build-timeout", "0.5")
    argv[argv.index(BUILD)] = "sleep 30"
    start = time.monotonic()
    code, out, _ = run_cli(argv)
    assert code == 3 and time.monotonic() - start < 20
    assert json.loads(out)["endpoint_reasons"]["old"] == "build timed out after 0.5s"


def test_a_missing_test_command_says_command_not_found(tmp_path, run_cli):
    make_repo(tmp_path / "r", 8, 4)
    code, _, _ = run_cli(args_for(tmp_path / "r", tmp_path / "st", "no-such-command-xyz"))
    assert code == 3
    _, out, _ = run_cli(["log", "--state", tmp_path / "st", "--json"])
    assert all(p["reason"].startswith("test exited 127 (command not found; it runs in a fresh "
                                      "worktree") for p in json.loads(out))


# --- items 6 and 7: credentials and the network -----------------------------------------------

def test_credentials_in_a_url_never_reach_the_output(tmp_path, run_cli):
    code, out, err = run_cli(["bisect", "--repo", "https://someone:SECRET-TOKEN@127.0.0.1:9/x.git",
                              "--old", "a", "--new", "b", "--test", "true", "--state",
                              tmp_path / "st", "--cache-dir", tmp_path / "cache"])
    assert code == 2 and "could not clone https://127.0.0.1:9/x.git" in err
    assert "SECRET-TOKEN" not in out + err


@pytest.mark.slow
def test_a_report_needs_neither_the_repository_nor_the_network(tmp_path, run_cli):
    make_repo(tmp_path / "r", 20, 11)
    code, out, _ = run_cli(args_for(tmp_path / "r", tmp_path / "st", TEST))
    res = json.loads(out)
    subprocess.run(["rm", "-rf", str(tmp_path / "r")], check=True)
    store = Store(tmp_path / "st")
    params = json.loads(store.db.execute("SELECT params FROM sessions").fetchone()[0])
    params["origin"] = "https://127.0.0.1:9/unreachable.git"
    store.db.execute("UPDATE sessions SET params=?", (json.dumps(params),))
    start = time.monotonic()
    code, out, _ = run_cli(["report", "--state", tmp_path / "st", "-o", tmp_path / "r.md"])
    assert code == 0 and time.monotonic() - start < 10
    assert "change 11" in (tmp_path / "r.md").read_text()     # titles from the store
    assert not (tmp_path / "cache").exists() and not (tmp_path / "st" / "repos").exists()
    assert res["first_new_title"] == "change 11"


# --- issue 15: what a PyTorch-scale run showed -----------------------------------------------

@pytest.mark.slow
def test_a_build_tree_survives_the_clean_between_probes(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 40, 23)
    build = ('mkdir -p build; [ -e build/first ] || touch build/first untracked; '
             'echo x >> build/count; ' + BUILD)
    # --rebuild: every probe builds (a kept build would put back its own build/ tree)
    argv = args_for(tmp_path / "r", tmp_path / "st", TEST, "--rebuild")
    argv[argv.index(BUILD)] = build
    code, out, _ = run_cli(argv)
    assert code == 0 and json.loads(out)["first_new"] == shas[23]
    slots = list((tmp_path / "st" / "worktrees").glob("*/lane-*/slot-*"))
    builds = sum(len((s / "build" / "count").read_text().split()) for s in slots)
    res = json.loads(out)      # each probe builds, the answer's fresh re-runs too
    assert builds == res["probes"] + res["verification"]["probes"] > len(slots)
    reused = [s for s in slots if len((s / "build" / "count").read_text().split()) > 1]
    assert reused and not any((s / "untracked").exists() for s in reused)  # the rest is cleaned


def _repo_with_a_dead_submodule(path: Path) -> list[str]:
    make_repo(path, 6, 3)
    subprocess.run(["git", "-C", str(path), "checkout", "-q", "main"], check=True)
    (path / ".gitmodules").write_text('[submodule "third_party/sub1"]\n'
                                      '\tpath = third_party/sub1\n'
                                      '\turl = https://127.0.0.1:9/sub1.git\n')
    subprocess.run(["git", "-C", str(path), "update-index", "--add", "--cacheinfo",
                    f"160000,{'1' * 40},third_party/sub1"], check=True)
    subprocess.run(["git", "-C", str(path), "add", ".gitmodules"], check=True)
    subprocess.run(["git", "-C", str(path), "commit", "-qm", "add a submodule"], check=True)
    return subprocess.run(["git", "-C", str(path), "rev-list", "--first-parent", "--reverse",
                           "main"], capture_output=True, text=True).stdout.split()


@pytest.mark.slow
def test_an_unreachable_submodule_is_named_and_can_be_left_out(tmp_path, run_cli):
    shas = _repo_with_a_dead_submodule(tmp_path / "r")
    argv = args_for(tmp_path / "r", tmp_path / "st", TEST)
    argv[argv.index("--old") + 1] = shas[0]
    code, out, err = run_cli(argv)
    res = json.loads(out)
    assert code == 3 and "submodule third_party/sub1: could not clone https://127.0.0.1:9/" \
        in res["endpoint_reasons"]["new"]
    code, out, _ = run_cli(argv[:-1] + ["--json", "--no-submodules"])
    assert code == 0 and json.loads(out)["first_new"] == shas[3]


# --- prebuilt artifacts for any repository (issue 11, generic mode) ---------------------------

@pytest.mark.slow
def test_prebuilt_artifacts_named_by_sha_leave_only_a_few_builds(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 80, 53)
    arts = tmp_path / "arts"
    arts.mkdir()
    for i in [*range(0, 80, 10), 79]:
        behaviour = "new" if i >= 53 else "old"
        (arts / f"out-{shas[i][:12]}.txt").write_text(behaviour + "\n")
    build = 'cp behaviour "$BISECT_ARTIFACTS/out-built.txt"'
    test = 'test "$(cat "$BISECT_ARTIFACTS"/out-*.txt)" = old'
    argv = args_for(tmp_path / "r", tmp_path / "st", test, "--artifacts", arts,
                    "--cache-dir", tmp_path / "cache")
    argv[argv.index(BUILD)] = build
    code, out, err = run_cli(argv)
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[53], err
    probes = Store(tmp_path / "st").probes(res["session"])
    builds = [p for p in probes if p.details["tier"] == "build"]
    assert {p.idx for p in builds} <= set(range(51, 60)) and len(builds) <= 4
    assert res["prebuilt"] == len(probes) - len(builds) >= 3


@pytest.mark.slow
def test_a_command_can_say_which_commit_an_artifact_is(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 40, 23)
    arts = tmp_path / "arts"
    arts.mkdir()
    for k, i in enumerate(range(0, 40, 5)):
        (arts / f"a{k}.txt").write_text(f"{shas[i]}\n{'new' if i >= 23 else 'old'}\n")
    build = 'printf "%s\\n%s\\n" "$BISECT_COMMIT" "$(cat behaviour)" > "$BISECT_ARTIFACTS/a.txt"'
    test = 'test "$(tail -n 1 "$BISECT_ARTIFACTS"/a*.txt)" = old'
    argv = args_for(tmp_path / "r", tmp_path / "st", test, "--artifacts", arts,
                    "--artifact-map", 'command:head -n 1 "$1"', "--cache-dir", tmp_path / "c")
    argv[argv.index(BUILD)] = build
    code, out, err = run_cli(argv)
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[23], err
    assert "8 prebuilt artifact(s) map onto the range" in err
    assert res["prebuilt"] >= 3


@pytest.mark.slow
def test_a_bad_artifact_rule_or_spec_is_clear(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 10, 5)
    code, _, err = run_cli(args_for(tmp_path / "r", tmp_path / "st", TEST, "--artifact-map",
                                    "guess"))
    assert code == 2 and "unknown --artifact-map rule 'guess'" in err
    code, out, err = run_cli(args_for(tmp_path / "r", tmp_path / "st", TEST, "--artifacts",
                                      "http://127.0.0.1:9/none/"))
    assert code == 0 and json.loads(out)["first_new"] == shas[5]
    assert err.count("going on without prebuilt artifacts") == 1
