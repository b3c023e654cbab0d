"""Metric verdicts that rest on this session's numbers (issue 31, findings 1-4): the test
prints numbers drawn from a seeded distribution (a counter file numbers the runs), so the
machine's load cannot change an answer. The local backend, the real engine and CLI."""
from __future__ import annotations

import json

from benchmarks.repos import make_repo
from bisect_ngc.comparator import Rule, judge, settled
from bisect_ngc.search import Verdict
from bisect_ngc.store import Store

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


def test_a_run_without_a_number_is_tried_again(tmp_path, run_cli, monkeypatch):
    """Finding 2: the first run of the session exits 1. It was a permanent skip of the old
    endpoint (exit 3), cached for the next session too."""
    shas = make_repo(tmp_path / "repo", 12, 7)
    monkeypatch.setenv("COUNTER", str(tmp_path / "counter"))
    monkeypatch.setenv("FAIL_RUNS", "1")
    code, out, err = run_cli(args(tmp_path, "main~11"))
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[7], (res, err)


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
    old = [(1, 1.0 + k / 1000) for k in range(10)]
    new = [(1, 1.1 + k / 1000) for k in range(10)]
    noisy = [(2, v) for v in (0.90, 1.20, 0.95, 1.15, 1.05, 0.85, 1.25, 1.0, 1.1, 0.92)]
    samples = {0: old + noisy, 9: new + [(2, v + 0.01) for _, v in noisy]}
    attempts = {0: 20, 9: 20}
    assert judge(10, samples, attempts, rule).difference.call != "differ"
    decided = settled(10, samples, rule)
    assert decided is not None and decided.call == "differ"
    j = judge(10, samples, attempts, rule, decided)
    assert j.verdicts == {0: Verdict.PASS, 9: Verdict.FAIL}
