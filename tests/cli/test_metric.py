"""`bisect --metric` end to end with the local backend on generated repositories whose test
times a real CPU workload, under this machine's own noise (no simulated numbers)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bisect_ngc.core.verdicts import ProbeOutcome
from bisect_ngc.metric.measured import measurement, metric_value
from bisect_ngc.core.search import Verdict
from bisect_ngc.core.store import Store

from tests.lib import unit_levels
from tests.lib.repos import make_repo

ROOT = Path(__file__).resolve().parents[2]

# 15% more loop iterations from the commit whose `behaviour` file says "new"; the run
# prints the fastest of 21 repetitions, in milliseconds. (This machine's own timing noise
# reaches several percent under load: a smaller change is the synthetic tests' business.)
WORKLOAD = """\
import json, pathlib, time
n = int(30_000 * (1.15 if pathlib.Path("behaviour").read_text().strip() == "new" else 1.0))
times = []
for _ in range(21):
    t0 = time.perf_counter()
    s = 0
    for i in range(n):
        s += i * i
    times.append((time.perf_counter() - t0) * 1e3)
print(json.dumps({"timing": {"best_ms": min(times)}, "iterations": n}))
"""


def metric_args(tmp_path: Path, repo: Path, n: int, *extra: str) -> list[str]:
    work = tmp_path / "work.py"
    work.write_text(WORKLOAD)
    return ["bisect", "--repo", repo, "--old", f"main~{n - 1}", "--new", "main",
            "--test", f"python3 {work}", "--metric", "timing.best_ms",
            "--state", tmp_path / "state", "--cache-dir", tmp_path / "cache", "--quiet", *extra]


@pytest.mark.slow
def test_a_fifteen_percent_slowdown_is_found_under_natural_noise(tmp_path, run_cli):
    shas = make_repo(tmp_path / "repo", 24, 13)
    args = metric_args(tmp_path, tmp_path / "repo", 24, "--runs-per-round", "10", "--json")
    code, out, err = run_cli([*args, "--max-runs", "60"])
    result = json.loads(out)
    most = 60
    if code == 4 and "could not be placed" in result["explanation"]:
        # a loaded machine left a commit unplaced (CI saw it once): the remedy the
        # answer names, a higher --max-runs, goes on from the runs measured
        most = 120
        code, out, err = run_cli([*args, "--max-runs", str(most)])
        result = json.loads(out)
    assert code == 0, (result["explanation"], err)
    assert result["first_new"] == shas[13] and result["last_old"] == shas[12]
    m = result["metric"]
    assert m["culprit"]["worse"] and m["culprit"]["call"] == "differ"
    assert m["endpoints"]["call"] == "differ"      # as decided, whatever the runs since
    assert 0.02 < m["culprit"]["change"] < 0.5 and m["culprit"]["low"] > 0    # 15% more work
    store = Store(tmp_path / "state")
    probes = store.probes(result["session"])
    rounds: dict[int, list[int]] = {}
    for p in probes:          # interleaved: each round's runs alternate between its commits
        rounds.setdefault(p.round, []).append(p.idx)
    for order in rounds.values():      # the first pass runs every commit of the round once,
        k = len(set(order))            # later passes only those still undecided
        assert len(set(order[:k])) == k, order
    assert all(len(p.details["samples"]) == 1 for p in probes)
    windows = sorted((p.started, p.ended) for p in probes)
    assert all(a[1] <= b[0] + 1e-3 for a, b in zip(windows, windows[1:]))   # one at a time
    report = Path(result["report"]).read_text()
    assert f"`timing.best_ms` was made {abs(m['culprit']['change']):.2%} worse by" in report
    assert "## The measurements" in report and f"| 13/23 | `{shas[13][:12]}`" in report
    assert f"runs one at a time, 10 per commit a round, at most {most}" in report
    svg = Path(result["report"]).with_name(result["session"] + "-metric.svg").read_text()
    assert svg.count("<circle") == len(m["samples"]) >= 5
    # the same command again: the first session's numbers do not decide; it measures anew
    code, out, _ = run_cli([*args, "--max-runs", str(most)])
    again = json.loads(out)
    assert again["cached"] == 0 and shas[13] in again["candidates"], again["explanation"]
    assert code == 0 or code == 4 and "could not be placed" in again["explanation"]


@pytest.mark.slow
def test_null_histories_name_no_culprit(tmp_path, run_cli):
    """20 histories with no change (the workload ignores nothing: every commit says old)."""
    for seed in range(20):
        n = 6 + seed % 7
        base = tmp_path / f"h{seed}"
        make_repo(base / "repo", n, n)       # transition past the end: no new behaviour
        code, out, err = run_cli(metric_args(base, base / "repo", n, "--max-runs", "10",
                                             "--p-threshold", "0.001"))
        assert code == 3, (seed, out, err)       # no change, or no difference shown
        assert "do not differ" in out or "could not be told apart" in out, out


@pytest.mark.slow
def test_a_metric_the_test_never_prints_is_said_so(tmp_path, run_cli):
    make_repo(tmp_path / "repo", 4, 2)
    args = metric_args(tmp_path, tmp_path / "repo", 4, "--runs-per-round", "2",
                       "--max-runs", "2")
    args[args.index("timing.best_ms")] = "step_ms"
    code, out, _ = run_cli(args)
    assert code == 3 and "printed no number 'step_ms'" in out and "iterations" in out


@pytest.mark.parametrize("extra, words", [
    (["--repeat", "3"], "--repeat and --repeat-policy are for pass/fail"),
    (["--min-change", "-2%"], "is negative"),
    (["--min-change", "two"], "is not a percentage"),
    (["--runs-per-round", "10", "--max-runs", "5"], "--max-runs must be at least"),
    (["--jobs", "2"], "--jobs must be 1"),
])
def test_bad_metric_input_is_one_sentence(tmp_path, run_cli, extra, words):
    make_repo(tmp_path / "repo", 4, 2)
    code, _, err = run_cli(metric_args(tmp_path, tmp_path / "repo", 4, *extra))
    assert code == 2 and words in err and "hint" in err.lower()


def test_metric_options_without_metric_are_refused(tmp_path, run_cli):
    make_repo(tmp_path / "repo", 4, 2)
    args = metric_args(tmp_path, tmp_path / "repo", 4, "--max-runs", "9")
    i = args.index("--metric")
    del args[i:i + 2]
    code, _, err = run_cli(args)
    assert code == 2 and "--max-runs only applies with --metric" in err


def test_a_run_measures_only_when_it_exits_0_with_a_number():
    ok = ProbeOutcome(Verdict.PASS, exit_code=0, details={"a": {"b": 2}, "flag": True})
    assert measurement(ok, "a.b") == (2.0, "a.b = 2")
    assert measurement(ok, "flag")[0] is None          # a bool is not a measurement
    failed = ProbeOutcome(Verdict.FAIL, exit_code=1, details={"a": {"b": 2}})
    assert measurement(failed, "a.b") == (None, "the test failed (exit 1): nothing measured")
    assert measurement(ProbeOutcome(Verdict.SKIP, "test exited 125"), "a.b")[0] is None
    assert metric_value({"x": float("nan")}, "x") is None and metric_value({}, "x") is None


@pytest.mark.slow
def test_metric_cmd_prints_the_number_after_the_test(tmp_path, run_cli):
    shas = make_repo(tmp_path / "repo", 6, 3)
    test = ('python3 -c "import random; b = open(\'behaviour\').read().strip(); '
            'open(\'result.txt\', \'w\').write(str((2 if b == \'new\' else 1) * '
            'random.uniform(0.99, 1.01)))"')
    args = ["bisect", "--repo", tmp_path / "repo", "--old", "main~5", "--new", "main",
            "--test", test, "--metric", "secs", "--metric-cmd", "echo noise; cat result.txt",
            "--state", tmp_path / "state", "--quiet", "--json"]
    code, out, err = run_cli(args)
    assert code == 0, err
    assert json.loads(out)["first_new"] == shas[3]
    i = args.index("--test")
    code, _, err = run_cli(args[:i] + args[i + 2:])
    assert code == 2 and "--metric-cmd needs --test" in err


@pytest.mark.slow
def test_raising_max_runs_goes_on_from_the_runs_already_measured(tmp_path, run_cli):
    """Issue 52: "could not be told apart within --max-runs 6", then the same command with
    --max-runs 40 continues that session (its runs kept and not measured again)."""
    shas = make_repo(tmp_path / "repo", 12, 7)
    counts = tmp_path / "counts"
    counts.mkdir()
    work = tmp_path / "work.py"      # 3% slower from #7, 2% run noise, seeded per run
    work.write_text(unit_levels.script(str(ROOT), str(counts), 5, 12, 7, 0.03, 0.0, 0.02))
    args = ["bisect", "--repo", tmp_path / "repo", "--old", "main~11", "--new", "main",
            "--test", f"python3 {work}", "--metric", "ms", "--min-change", "0.01",
            "--runs-per-round", "5", "--state", tmp_path / "state", "--cache-dir",
            tmp_path / "cache", "--quiet", "--json"]
    code, out, err = run_cli([*args, "--max-runs", "6"])
    first = json.loads(out)
    assert code == 3 and "could not be told apart within --max-runs 6" in \
        first["explanation"], (first["explanation"], err)
    assert "the same command goes on from these runs" in first["explanation"]
    wanted = re.search(r"runs vary by [\d.]+% \(a robust sd\); telling \+[\d.]+% apart needs "
                       r"about (\d+) runs of each end \(6 ran\)", first["explanation"])
    assert wanted and 6 < int(wanted[1]) <= 40, first["explanation"]
    measured = {i: int((counts / str(i)).read_text()) for i in (0, 11)}
    assert measured == {0: 6, 11: 6}
    code, out, err = run_cli([*args, "--max-runs", "40"])
    again = json.loads(out)
    assert code == 0 and again["first_new"] == shas[7], (again["explanation"], err)
    assert again["session"] == first["session"] and again["metric"]["rule"]["earlier"] == [6]
    probes = Store(tmp_path / "state").probes(again["session"])
    ends = [p for p in probes if p.idx in (0, 11)]
    assert len(ends) == int((counts / "0").read_text()) + int((counts / "11").read_text())
    assert again["metric"]["samples"][shas[0]]["runs"] == int((counts / "0").read_text()) > 6
    evidence = Path(again["report"]).read_text().split("## Evidence")[1]   # in medians
    first_new = again["metric"]["samples"][shas[7]]
    assert f"`ms` median {first_new['median']:.6g} over {first_new['n']} runs" in evidence


@pytest.mark.slow
def test_a_slow_path_in_some_runs_is_told_as_such_not_as_no_change(tmp_path, run_cli):
    """Issue 52, finding 3: from the culprit on, 30% of runs take a path 15% slower, the
    centre does not move. The endpoints were told "no change", or could not be told
    apart; the answer now says which runs moved, and exits 3 without a culprit."""
    make_repo(tmp_path / "repo", 6, 1)
    counts = tmp_path / "counts"
    counts.mkdir()
    work = tmp_path / "work.py"
    work.write_text(unit_levels.script(str(ROOT), str(counts), 3, 6, 1, 0.0, 0.0, 0.005,
                                       slow=0.15, share=0.3))
    code, out, _ = run_cli(["bisect", "--repo", tmp_path / "repo", "--old", "main~5",
                            "--new", "main", "--test", f"python3 {work}", "--metric", "ms",
                            "--state", tmp_path / "state", "--cache-dir", tmp_path / "cache",
                            "--quiet", "--json"])
    res = json.loads(out)
    assert code == 3 and res["first_new"] is None, res
    why = res["explanation"]
    assert "typical runs do not differ" in why and "a change in some runs only" in why, why
    assert "of the new endpoint's 30 runs are worse (higher) than every run of the old" in why
    tail = res["metric"]["some_runs"]
    assert tail["side"] == "new" and tail["of"] == 30 and tail["p"] <= 0.01, tail


@pytest.mark.slow
def test_a_decided_no_change_is_not_continued(tmp_path, run_cli):
    """"Do not differ" is an answer, not a want of runs: a higher --max-runs starts anew."""
    make_repo(tmp_path / "repo", 6, 6)
    counts = tmp_path / "counts"
    counts.mkdir()
    work = tmp_path / "work.py"      # no change, 0.5% run noise
    work.write_text(unit_levels.script(str(ROOT), str(counts), 2, 6, 6, 0.0, 0.0, 0.005))
    args = ["bisect", "--repo", tmp_path / "repo", "--old", "main~5", "--new", "main",
            "--test", f"python3 {work}", "--metric", "ms", "--runs-per-round", "5",
            "--state", tmp_path / "state", "--cache-dir", tmp_path / "cache", "--quiet",
            "--json"]
    code, out, _ = run_cli([*args, "--max-runs", "10"])
    first = json.loads(out)
    assert code == 3 and "do not differ" in first["explanation"], first["explanation"]
    code, out, _ = run_cli([*args, "--max-runs", "20"])
    again = json.loads(out)
    assert code == 3 and again["session"] != first["session"]
