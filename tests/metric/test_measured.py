"""Metric verdicts that rest on this session's numbers (issue 31, findings 1-4): the test
prints numbers drawn from a seeded distribution (a counter file numbers the runs), so the
machine's load cannot change an answer. The local backend, the real engine and CLI."""
from __future__ import annotations

import json

import pytest

from tests.lib.repos import make_repo
from bisect_ngc.metric.comparator import Rule, judge, settled
from bisect_ngc.core.search import Verdict
from bisect_ngc.core.store import Store

# 5% slower from the commit whose `behaviour` says "new"; 1% lognormal noise; SCALE is the
# machine (another session on a slower one); FAIL_RUNS: the run numbers that print nothing.
DRAW = """\
import json, os, pathlib, random, sys
counter = pathlib.Path(os.environ["COUNTER"])
k = len(counter.read_text().split()) if counter.exists() else 0
counter.write_text(counter.read_text() + "x\\n" if counter.exists() else "x\\n")
if str(k + 1) in os.environ.get("FAIL_RUNS", "").split(","):
    sys.exit(1)
new = pathlib.Path("behaviour").read_text().strip() == "new"
rng = random.Random(k)
level = float(os.environ.get("SCALE", "1")) * (1.05 if new else 1.0)
print(json.dumps({"t": level * rng.lognormvariate(0, 0.01)}))
"""


def args(tmp_path, old: str, *extra: str) -> list:
    script = tmp_path / "draw.py"
    script.write_text(DRAW)
    return ["bisect", "--repo", tmp_path / "repo", "--old", old, "--new", "main", "--test",
            f"python3 {script}", "--metric", "t", "--state", tmp_path / "state", "--quiet",
            "--json", *extra]


@pytest.mark.slow
def test_numbers_of_another_session_never_decide(tmp_path, run_cli, monkeypatch):
    """Finding 1: session 1 ran on a machine 10% slower; session 2, on an overlapping
    range on the same state, measures every commit it judges itself."""
    shas = make_repo(tmp_path / "repo", 16, 9)
    monkeypatch.setenv("COUNTER", str(tmp_path / "counter"))
    monkeypatch.setenv("SCALE", "1.10")
    code, out, err = run_cli(args(tmp_path, "main~15"))
    assert code == 0 and json.loads(out)["first_new"] == shas[9], err
    monkeypatch.setenv("SCALE", "1.0")
    code, out, err = run_cli(args(tmp_path, "main~12"))
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[9] and res["cached"] == 0, (res, err)
    probes = Store(tmp_path / "state").probes(res["session"])
    judged = set(res["metric"]["samples"])
    assert judged <= {p.commit for p in probes if not p.cached}


@pytest.mark.slow
def test_a_run_without_a_number_is_tried_again(tmp_path, run_cli, monkeypatch):
    """Finding 2: the first run of the session exits 1. It was a permanent skip of the old
    endpoint (exit 3), cached for the next session too."""
    shas = make_repo(tmp_path / "repo", 12, 7)
    monkeypatch.setenv("COUNTER", str(tmp_path / "counter"))
    monkeypatch.setenv("FAIL_RUNS", "1")
    code, out, err = run_cli(args(tmp_path, "main~11"))
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[7], (res, err)


@pytest.mark.slow
def test_an_endpoint_that_stops_giving_numbers_ends_within_max_runs(tmp_path, run_cli,
                                                                     monkeypatch):
    """Finding 3: after its first runs, every run fails: the session ends, exit 3, saying
    the endpoints could not be told apart, within --max-runs a commit."""
    make_repo(tmp_path / "repo", 8, 4)
    monkeypatch.setenv("COUNTER", str(tmp_path / "counter"))
    monkeypatch.setenv("FAIL_RUNS", ",".join(str(k) for k in range(3, 400)))
    code, out, err = run_cli(args(tmp_path, "main~7", "--max-runs", "10"))
    res = json.loads(out)
    assert code == 3 and res["status"] == "invalid-endpoints", (res, err)
    runs = len((tmp_path / "counter").read_text().split())
    assert runs <= 2 * 10, runs


def test_once_the_endpoints_differ_later_looks_do_not_undo_it():
    """Finding 4: the endpoints differed in round 1; round 2's noisier numbers alone would
    call the pair unknown. The search goes on with the first decision."""
    rule = Rule(min_change=0.02, block=10, max_runs=30)
    old = [(1, 1.0 + k / 1000) for k in range(8)]
    new = [(1, 1.1 + k / 1000) for k in range(8)]
    noisy = [(2, v) for v in (0.90, 1.20, 0.95, 1.15, 1.05, 0.85, 1.25, 1.0, 1.1, 0.92)]
    samples = {0: old + noisy, 9: new + [(2, v + 0.01) for _, v in noisy]}
    attempts = {0: 18, 9: 18}
    assert judge(10, samples, attempts, rule).difference.call != "differ"
    decided = settled(10, samples, rule)
    assert decided is not None and decided.call == "differ"
    j = judge(10, samples, attempts, rule, decided)
    assert j.verdicts == {0: Verdict.PASS, 9: Verdict.FAIL}


@pytest.mark.slow
@pytest.mark.parametrize("kill_after", [4, 9, 15])
def test_a_killed_metric_bisection_resumes_with_every_number_kept(tmp_path, monkeypatch,
                                                                   kill_after):
    """Killed (SIGKILL) in the middle of its rounds, the same command resumes the session
    with every number it had measured, and finds the culprit."""
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    shas = make_repo(tmp_path / "repo", 16, 9)
    monkeypatch.setenv("COUNTER", str(tmp_path / "counter"))
    argv = [sys.executable, "-m", "bisect_ngc", *map(str, args(tmp_path, "main~15"))]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    db, end = tmp_path / "state" / "state.db", time.monotonic() + 120

    def records() -> list[tuple]:
        try:
            with sqlite3.connect(db) as con:
                return con.execute("SELECT session, round, idx, details FROM probes "
                                   "ORDER BY rowid").fetchall()
        except sqlite3.OperationalError:      # the file exists before its tables do
            return []

    while not (db.exists() and len(records()) >= kill_after):
        assert time.monotonic() < end and proc.poll() is None, "the bisection never got going"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    before = records()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    result = json.loads(done.stdout)
    assert done.returncode == 0 and result["first_new"] == shas[9], (result, done.stderr)
    after = [r for r in records() if r[0] == result["session"]]
    assert after[:len(before)] == before        # the same session, every number kept


@pytest.mark.slow
def test_the_metric_report_reads_right_and_its_commands_reproduce(tmp_path, run_cli,
                                                                  monkeypatch):
    """Finding 6: one row per commit with its call; a narrowing table that moves; every
    run's log kept and linked on one line a commit; `probe --metric` as printed."""
    import re
    import shlex
    from pathlib import Path

    shas = make_repo(tmp_path / "repo", 12, 5)
    monkeypatch.setenv("COUNTER", str(tmp_path / "counter"))
    code, out, err = run_cli(args(tmp_path, "main~11"))
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[5], (res, err)
    report = Path(res["report"]).read_text()
    measured = res["metric"]["samples"]
    rows = [line for line in report.splitlines() if re.match(r"\| \d+/11 \| `", line)]
    assert len(rows) == len(measured) and "## Probes" not in report
    assert {"like old", "like new", "old endpoint", "new endpoint"} <= \
        {s["call"] for s in measured.values()}
    narrowing = report.split("## How the range narrowed")[1].split("##")[0]
    ends = re.findall(r"^\| \d+ \| \d+ \| (\d+) \| (\d+) \|", narrowing, re.M)
    assert ends[0] == ("0", "11") and ends[-1] == ("4", "5"), narrowing
    logs = report.split("## Logs")[1]
    assert logs.count("`" + shas[5][:12] + "`") == 1          # one line a commit
    runs = len((tmp_path / "counter").read_text().split())
    linked = re.findall(r"\]\(([^)]*test-1\.log)\)", logs)
    assert len(linked) == len(set(linked)) == runs             # every run's own log
    assert all((Path(res["report"]).parent / p).exists() for p in linked)
    assert "Measured: **" in report and "commits probed" not in report
    commands = report.split("## Reproduce")[1].split("```sh")[1].split("```")[0].split("\n")
    probe = shlex.split(next(c for c in commands if shas[5] in c))
    assert probe[:2] == ["bisect-ngc", "probe"] and "--metric" in probe
    places = {"$REPO": str(tmp_path / "repo"), "$BISECT_NGC_STATE": str(tmp_path / "state")}
    code, out, err = run_cli([re.sub(r"\$[A-Z_]+", lambda m: places[m.group()], a)
                              for a in probe[1:]])      # as a shell with both set would
    assert code == 0, (out, err)
    assert out.count(f"{shas[5][:12]} run ") == 5 and "t: median 1.05" in out, out
