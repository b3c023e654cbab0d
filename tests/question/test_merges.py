"""Merges (issue 51): the answer is the commit that made the change, in every history
shape, through the real CLI on the local backend and real git repositories made here
(tests/lib/merge_shapes.py plants each shape's answer)."""
from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from tests.lib.histories import Dag
from tests.lib.merge_shapes import SHAPES, merge_case


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", range(3))
def test_each_merge_shape_names_the_commit_that_made_the_change(tmp_path, run_cli, shape,
                                                              seed):
    """Never a wrong `found`; the parent printed is a real parent of the answer."""
    case = merge_case(tmp_path / "case", random.Random(f"{shape}:{seed}"), shape, seed)
    told = _bisect(run_cli, case, tmp_path / "state")
    assert told["status"] == "found", (shape, told["explanation"])
    assert told["first_new"] in {case.planted, *case.also_right}, (shape, told["explanation"])
    parents = _git(case.repo, "rev-list", "--parents", "-n1", told["first_new"]).split()[1:]
    assert told["parent"] == parents.index(told["last_old"]) + 1


@pytest.mark.slow
@pytest.mark.parametrize("shape,count", [("sync", 54), ("release", 45), ("cherrypick", 20)])
def test_the_issue_counts_of_each_shape_are_all_right(tmp_path, run_cli, shape, count):
    """The issue's counts: 54 sync shapes, 45 with --old off the path, 20 inverted
    branches; each once, each right (the tool was wrong in 36, 27 and 20 of them)."""
    wrong = []
    for seed in range(100, 100 + count):
        case = merge_case(tmp_path / f"case-{seed}", random.Random(f"{shape}:{seed}"), shape,
                          seed)
        told = _bisect(run_cli, case, tmp_path / f"state-{seed}")
        if told["status"] != "found" or told["first_new"] not in {case.planted,
                                                                  *case.also_right}:
            wrong.append((seed, told["status"], told["explanation"]))
    assert not wrong, wrong


def _bisect(run_cli, case, state: Path, *extra: str) -> dict:
    case.scripts_for("tool")
    code, out, err = run_cli(["bisect", "--repo", case.repo, "--old", case.old, "--new",
                              case.new, "--build", case.build, "--test", case.test,
                              "--state", state, "--quiet", "--json", *extra])
    assert code in (0, 3), err
    return json.loads(out)


def test_the_answer_is_told_once_with_every_probe_counted(tmp_path, run_cli):
    """A three-level nest: one session id (the question's), the descents in order, the
    commit found, every session's runs counted, and one report that names the commit."""
    case = merge_case(tmp_path / "case", random.Random(3), "deep", 3)
    told = _bisect(run_cli, case, tmp_path / "st")
    assert told["status"] == "found" and told["first_new"] == case.planted
    levels = told["descents"]
    assert len(levels) == 3 and all(lv["found"] for lv in levels)
    assert [lv["found"] for lv in levels[:-1]] == [lv["merge"] for lv in levels[1:]]
    assert told["session"] not in {lv["session"] for lv in levels}
    runs, _ = case.counts("tool")
    assert told["runs"] == runs
    parent = told["last_old"]
    assert parent in _git(case.repo, "rev-list", "--parents", "-n1", told["first_new"]).split()
    report = Path(told["report"]).read_text()
    assert told["session"] in told["report"] and f"(`{case.planted}`)" in report
    assert report.count("is a merge.") == 3


def test_a_cherry_picked_fix_keeps_the_merge_with_the_reason(tmp_path, run_cli):
    """The branch's ends behave the other way round (its base fails, its tip passes): its
    own answer would be the first commit that passes. The merge stays the answer."""
    case = merge_case(tmp_path / "case", random.Random(1), "cherrypick", 1)
    told = _bisect(run_cli, case, tmp_path / "st")
    assert told["status"] == "found" and told["first_new"] == case.planted
    assert "other way round" in told["descents"][0]["why"]
    assert "other way round" in told["explanation"]


def test_off_path_old_never_names_a_commit_without_it(tmp_path, run_cli):
    """--old is a release tag off the first-parent path: no candidate lacks it, so the
    bug main had before the release was merged back is never taken for the change."""
    case = merge_case(tmp_path / "case", random.Random(5), "release", 5)
    told = _bisect(run_cli, case, tmp_path / "st")
    assert told["first_new"] == case.planted
    for sha in [told["last_old"], told["first_new"]]:
        _git(case.repo, "merge-base", "--is-ancestor", case.old, sha)


def _timed(run_cli, tmp_path: Path, old: str, new: str) -> tuple[int, dict, str]:
    """`bisect --metric ms` of tmp_path/repo, whose `ms` file is each commit's time."""
    test = ('python3 -c "import random; open(\'result.txt\', \'w\').write(str('
            'float(open(\'ms\').read()) * random.uniform(0.995, 1.005)))"')
    code, out, err = run_cli(["bisect", "--repo", tmp_path / "repo", "--old", old, "--new",
                              new, "--test", test, "--metric", "ms", "--metric-cmd",
                              "cat result.txt", "--state", tmp_path / "st", "--quiet",
                              "--json"])
    return code, json.loads(out), err


@pytest.mark.slow
def test_a_metric_branch_that_changes_the_other_way_keeps_the_merge(tmp_path, run_cli):
    """The merge is 5% slower than its first parent; the branch it merged got 9% faster
    from where it left: the branch's answer would be a speed-up, so the merge stays."""
    dag = Dag(tmp_path / "repo")
    m0 = dag.commit("main", "root", [], {"ms": "110\n"})
    m1 = dag.commit("main", "faster", [m0], {"ms": "100\n"})
    m2 = dag.commit("main", "main goes on", [m1], {"main.txt": "2\n"})
    b = [m0]
    for i in range(4):
        b.append(dag.commit("topic", f"topic {i}", [b[-1]],
                            {"t.txt": f"{i}\n", **({"ms": "100\n"} if i == 2 else {})}))
    merge = dag.commit("main", "Merge branch topic", [m2, b[-1]], {"ms": "105\n", "t.txt": "3\n"})
    after = dag.commit("main", "after", [merge], {"a.txt": "1\n"})
    shas = dag.finish()
    code, told, err = _timed(run_cli, tmp_path, shas[m2], shas[after])
    assert code == 0 and told["first_new"] == shas[merge], err
    assert "other way" in told["descents"][0]["why"]


@pytest.mark.slow
def test_every_metric_change_is_looked_into_on_its_own(tmp_path, run_cli):
    """Two changes on the first-parent path, each a pull request's merge: twice as slow,
    then 40% faster (20% slower overall). The answer keeps both, and each merge is looked
    into on its own, naming each PR's commit."""
    dag = Dag(tmp_path / "repo")
    old = dag.commit("main", "root", [], {"ms": "100\n"})
    at, culprits = old, []
    for k, ms in enumerate(("200", "120")):
        main = dag.commit("main", f"main {k}", [at], {f"m{k}": "1\n"})
        b = [main]
        for i in range(3):
            b.append(dag.commit(f"pr{k}", f"pr{k} {i}", [b[-1]],
                                {f"p{k}": f"{i}\n", **({"ms": f"{ms}\n"} if i == 1 else {})}))
        culprits.append(b[2])
        at = dag.commit("main", f"Merge pull request #{k + 1}", [main, b[-1]],
                        dict(dag.files[b[-1]]))
        at = dag.commit("main", f"after {k}", [at], {f"a{k}": "1\n"})
    shas = dag.finish()
    code, told, err = _timed(run_cli, tmp_path, shas[old], shas[at])
    assert code == 0, err
    changes = told["metric"]["changes"]
    assert len(changes) == 2 and told["first_new"] == shas[culprits[0]]
    assert changes[1]["found"] == shas[culprits[1]]
    assert {lv["change"] for lv in told["descents"]} == {0, 2}


def test_an_ambiguous_branch_makes_the_answer_ambiguous_in_every_telling(tmp_path, run_cli):
    """The change sits among untestable commits on the branch: the answer is ambiguous
    (exit 4) with the branch's candidates, and the question's report says so too."""
    dag = Dag(tmp_path / "repo")
    old = dag.commit("main", "root", [], {"behaviour": "old\n"})
    main = dag.commit("main", "main 1", [old], {"m": "1\n"})
    b = [old]
    for i, files in enumerate(({"p": "1\n"}, {"broken": "1\n"}, {"behaviour": "new\n"},
                               {"broken": None}, {"p": "5\n"})):
        b.append(dag.commit("pr", f"pr {i}", [b[-1]], files))
    merge = dag.commit("main", "Merge pr", [main, b[-1]], dict(dag.files[b[-1]]))
    new = dag.commit("main", "after", [merge], {"z": "1\n"})
    shas = dag.finish()
    code, out, err = run_cli(["bisect", "--repo", tmp_path / "repo", "--old", shas[old],
                              "--new", shas[new], "--test",
                              'test -e broken && exit 125; test "$(cat behaviour)" = old',
                              "--state", tmp_path / "st", "--quiet", "--json"])
    told = json.loads(out)
    assert code == 4 and told["status"] == "ambiguous", err
    assert shas[b[3]] in told["candidates"] and shas[merge] not in told["candidates"]
    report = Path(told["report"]).read_text()
    assert report.startswith("# Bisect report") and "**Ambiguous:" in report
    assert "introduced by" not in report
