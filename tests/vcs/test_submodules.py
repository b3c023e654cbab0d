"""Submodules from the shared object cache, on generated PyTorch-shaped repositories (real
git: a superproject and bare submodule repositories next to it)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import git
import pytest

from bisect_ngc.vcs.mirrors import CheckoutError
from bisect_ngc.vcs.history import History
from bisect_ngc.vcs.worktrees import Worktrees
from bisect_ngc.core.store import Store
from bisect_ngc.vcs.submodules import SubmoduleCache

from tests.lib.repos import make_pytorch_shaped_repo

TEST = 'test "$(cat behaviour)" = old'


@pytest.fixture
def shaped(tmp_path):
    return make_pytorch_shaped_repo(tmp_path / "pytorch", commits=120, files=300, submodules=5,
                                    sub_commits=12, sub_files=8, move_every=5,
                                    transition=71, missing=(40,))


def slots(tmp_path, repo) -> Worktrees:
    history = History.open(str(repo), tmp_path / "cache")
    return Worktrees(history, tmp_path / "wt", SubmoduleCache(tmp_path / "cache" / "subs"))


def pointer(repo: Path, sha: str, path: str) -> str:
    return git.Repo(repo).git.rev_parse(f"{sha}:{path}")


@pytest.mark.slow
def test_no_stale_file_survives_a_slot_switch(tmp_path, shaped):
    repo, shas = tmp_path / "pytorch", shaped["shas"]
    # A commit that drops a submodule, on top of the last one.
    r = git.Repo(repo)
    r.git.rm("-q", "--cached", "third_party/lib01")
    r.git.config("-f", ".gitmodules", "--remove-section", "submodule.third_party/lib01")
    r.git.add(".gitmodules")
    r.git.commit("-q", "-m", "drop lib01")
    dropped = r.head.commit.hexsha
    wt = slots(tmp_path, repo)
    a, b = shas[24], shas[26]         # commit 25 moves one pointer (every 5th commit)
    moved = next(p for p in shaped["subs"] if pointer(repo, a, p) != pointer(repo, b, p))
    slot = wt.checkout(0, a)
    sub = slot / moved
    k = shaped["sub_shas"][moved].index(pointer(repo, a, moved))
    assert (sub / f"only-at-{k}.txt").exists()
    (sub / "built.o").write_text("left by a build")
    (sub / "src" / "part0" / "file0.h").write_text("edited by a build")
    (slot / "stray.txt").write_text("left by a test")
    (slot / "build").mkdir()
    (slot / "build" / "kept.o").write_text("the build tree")
    wt.checkout(0, b, keep=("build",))
    assert not (sub / f"only-at-{k}.txt").exists() and (sub / f"only-at-{k + 1}.txt").exists()
    assert not (sub / "built.o").exists() and not (slot / "stray.txt").exists()
    assert (sub / "src" / "part0" / "file0.h").read_text().startswith("// ")
    assert (slot / "build" / "kept.o").exists()
    # A submodule gone from the tree leaves no directory behind.
    assert (slot / "third_party" / "lib01" / "VERSION").exists()
    wt.checkout(0, dropped)
    assert not (slot / "third_party" / "lib01").exists()


@pytest.mark.slow
def test_slots_share_one_copy_of_the_submodule_objects(tmp_path, shaped):
    wt = slots(tmp_path, tmp_path / "pytorch")
    for slot, i in ((0, 10), (1, 90)):
        path = wt.checkout(slot, shaped["shas"][i])
        for sub in shaped["subs"]:
            stats = git.Repo(path / sub).git.count_objects("-v")
            counts = dict(line.split(": ") for line in stats.splitlines())
            assert counts["count"] == "0" and counts["size-pack"] == "0", (slot, sub, counts)
            assert (path / sub / ".git" / "objects" / "info" / "alternates").read_text() \
                .startswith(str(tmp_path / "cache" / "subs"))
    assert len(list((tmp_path / "cache" / "subs").glob("*.git-*[!k]"))) == len(shaped["subs"])


@pytest.mark.slow
def test_a_commit_missing_from_its_submodule_is_a_skip_that_names_it(tmp_path, shaped):
    wt = slots(tmp_path, tmp_path / "pytorch")
    path = shaped["missing"][40]
    with pytest.raises(CheckoutError, match=f"submodule {path}: commit eeeeeeeeeeee missing "
                                            "upstream"):
        wt.checkout(0, shaped["shas"][40])
    # A later run, with the remote gone: still a skip, saying it could not be fetched.
    slots(tmp_path / "other", tmp_path / "pytorch").checkout(0, shaped["shas"][39])
    shutil.move(tmp_path / "pytorch-remotes", tmp_path / "moved-away")
    with pytest.raises(CheckoutError, match="not in the cache and .* could not be fetched"):
        slots(tmp_path / "other", tmp_path / "pytorch").checkout(0, shaped["shas"][40])


@pytest.mark.slow
def test_the_bisection_goes_on_offline_after_its_first_probe(tmp_path, shaped, run_cli):
    shas = shaped["shas"]
    base = ["--repo", str(tmp_path / "pytorch"), "--build", "true", "--test", TEST,
            "--state", str(tmp_path / "st"), "--cache-dir", str(tmp_path / "cache")]
    code, _, _ = run_cli(["probe", "--commit", shas[-1], *base])     # the first probe
    assert code == 1
    shutil.move(tmp_path / "pytorch-remotes", tmp_path / "moved-away")
    code, out, err = run_cli(["bisect", "--old", shas[0], "--new", shas[-1], "--jobs", "2",
                              "--json", "--quiet", *base])
    assert code == 0, err
    res = json.loads(out)
    assert res["first_new"] == shas[71]


@pytest.mark.slow
def test_missing_submodule_commits_are_skips_never_aborts(tmp_path, run_cli):
    # The transition right after the broken pointer: the skip hides it.
    shaped = make_pytorch_shaped_repo(tmp_path / "pytorch", commits=80, files=100,
                                      submodules=3, sub_commits=6, sub_files=4, move_every=7,
                                      transition=41, missing=(40,))
    shas = shaped["shas"]
    code, out, err = run_cli(["bisect", "--repo", str(tmp_path / "pytorch"), "--old", shas[0],
                              "--new", shas[-1], "--build", "true", "--test", TEST, "--state",
                              str(tmp_path / "st"), "--cache-dir", str(tmp_path / "cache"),
                              "--json", "--quiet"])
    res = json.loads(out)
    assert code == 4 and res["candidates"] == shas[40:42], err
    probe = next(p for p in Store(tmp_path / "st").probes(res["session"])
                 if p.commit == shas[40])
    assert probe.reason == f"submodule {shaped['missing'][40]}: commit eeeeeeeeeeee missing " \
                           "upstream"
