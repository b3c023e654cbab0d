"""The accuracy benchmark's generators (tests/lib/histories.py, merge_shapes.py): the
planted answer is what an exhaustive sweep of every commit says, and what `git bisect
run` names where it can; flaky tests replay exactly."""
from __future__ import annotations

import random
import subprocess

import pytest

from tests.lib.histories import linear, linear_cases, null
from tests.lib.merge_shapes import SHAPES, merge_case

pytestmark = pytest.mark.slow      # real repositories, real git, git bisect run


def files(repo, sha: str) -> dict[str, str]:
    names = subprocess.run(["git", "ls-tree", "--name-only", sha], cwd=repo,
                           capture_output=True, text=True, check=True).stdout.split()
    return {n: subprocess.run(["git", "show", f"{sha}:{n}"], cwd=repo, capture_output=True,
                              text=True, check=True).stdout for n in names}


def fails(f: dict[str, str]) -> bool | None:
    """The planted test, read from the files (None: untestable)."""
    if "broken" in f:
        return None
    if "combo_a" in f and "combo_b" in f or "needs" in f and "feature" not in f or "bug" in f:
        return True
    return f.get("behaviour", "").strip() == "new"


def culprits(case) -> list[str]:
    """Every commit of the range that fails while all its parents pass."""
    out = subprocess.run(["git", "rev-list", "--parents", case.new, f"^{case.old}"],
                         cwd=case.repo, capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        commit, *parents = line.split()
        if fails(files(case.repo, commit)) and all(fails(files(case.repo, p)) is False
                                                   for p in parents):
            found.append(commit)
    return found


def git_bisect(case, who: str = "git") -> str | None:
    case.scripts_for(who)
    run = lambda *a: subprocess.run(["git", *a], cwd=case.repo, capture_output=True,  # noqa
                                    text=True).stdout
    run("bisect", "start", case.new, case.old)
    said = run("bisect", "run", "sh", "-c", f"{case.build} || exit 125; {case.test}")
    run("bisect", "reset")
    first = [ln.split()[0] for ln in said.splitlines() if "is the first bad commit" in ln]
    return first[0] if first else None


# Where commits off the answer's line fail for other reasons (a branch that lacks a
# feature main added, main's commits that still have a bug the release fixed), git's
# premise that every commit is good or bad breaks: the sweep alone says the truth there.
GIT_CAN = {"pr", "nested", "crisscross", "cherrypick", "breaks"}


@pytest.mark.parametrize("shape", SHAPES)
def test_each_merge_shape_plants_one_culprit_that_a_sweep_and_git_find(tmp_path, shape):
    for seed in range(3):
        case = merge_case(tmp_path / f"{seed}", random.Random(seed), shape, seed)
        assert fails(files(case.repo, case.old)) is False and fails(files(case.repo, case.new))
        assert culprits(case) == [case.planted]
        if shape in GIT_CAN:
            assert git_bisect(case) == case.planted


def test_linear_cases_plant_the_first_new_commit_and_hide_it_only_behind_untestables(
        tmp_path):
    for case in linear_cases(tmp_path, random.Random(4), 8, (8, 32)):
        shas = subprocess.run(["git", "rev-list", "--reverse", case.new], cwd=case.repo,
                              capture_output=True, text=True, check=True).stdout.split()
        verdicts = [fails(files(case.repo, s)) for s in shas]
        first = next(i for i, v in enumerate(verdicts) if v)
        assert shas[first] == case.planted or verdicts[shas.index(case.planted)] is None
        hidden = verdicts[shas.index(case.planted)] is None or \
            verdicts[shas.index(case.planted) - 1] is None
        assert case.nameable == (not hidden)
        if case.nameable:
            assert git_bisect(case) == case.planted


def test_a_flaky_test_replays_exactly_and_shows_its_rates(tmp_path):
    case = linear(tmp_path / "f", 7, 8, 4, q=0.5, eps=0.0)
    case.scripts_for("tool")
    wt = tmp_path / "wt"
    subprocess.run(["git", "clone", "-q", str(case.repo), str(wt)], check=True)

    def draws(n: int) -> list[int]:
        (case.dir / "runs-tool").write_text("")
        return [subprocess.run(["sh", str(case.dir / "test.sh")], cwd=wt).returncode
                for _ in range(n)]
    first = draws(40)
    assert draws(40) == first and set(first) == {0, 1}       # the same stream, both outcomes
    subprocess.run(["git", "checkout", "-q", "HEAD~6"], cwd=wt, check=True)    # old side
    assert set(draws(10)) == {0}                              # eps 0: never fails there
    empty = null(tmp_path / "n", 3, 6, "old")
    assert empty.planted is None
