"""A kept build tree never stands in for a commit's sources (issue 20, item 1).

Debian's setuptools 66 compares whole seconds: a checkout in the same second as the last
link looked "not newer", and a commit that does not compile reused the previous commit's
extension. These tests date the kept outputs into the next second (a source whose
timestamp does not move forward past them) or an hour ahead (a skewed clock), and build
with a tool that reads whole seconds, as that setuptools does.
"""
from __future__ import annotations

import pytest

import os
import time
from pathlib import Path

from bisect_ngc.vcs.build_trees import SKEW_LIMIT_S, newest_mtime, settle

from tests.lib.repos import make_repo

# make-like: recompile only when the source is newer, in whole seconds, than the output;
# the output is dated into the next second, as a link in the checkout's second reads.
SECONDS_BUILD = ('mkdir -p build && if [ ! -e build/out ] || '
                 '[ "$(stat -c %Y behaviour)" -gt "$(stat -c %Y build/out)" ]; '
                 'then test ! -e broken && cp behaviour build/out; fi && '
                 'touch -d "@$(( $(date +%s) + {ahead} ))" build/out && '
                 'cp build/out "$BISECT_ARTIFACTS/out"')
OLD_TEST = 'test "$(cat "$BISECT_ARTIFACTS/out")" = old'


def probe(run_cli, repo: Path, commit: str, tmp: Path, ahead: int):
    return run_cli(["probe", "--repo", repo, "--commit", commit, "--backend", "local",
                    "--build", SECONDS_BUILD.format(ahead=ahead), "--test", OLD_TEST,
                    "--state", tmp / "st", "--cache-dir", tmp / "cache"])


@pytest.mark.slow
def test_a_broken_commit_after_a_build_in_the_same_second_fails_to_build(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 6, 3, {3})
    code, out, _ = probe(run_cli, tmp_path / "r", shas[2], tmp_path, ahead=1)
    assert code == 0, out
    code, out, _ = probe(run_cli, tmp_path / "r", shas[3], tmp_path, ahead=1)
    assert code == 125 and "build failed" in out, out


def test_a_tree_dated_ahead_of_the_clock_is_removed_before_the_build(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 6, 3, {3})
    code, out, _ = probe(run_cli, tmp_path / "r", shas[2], tmp_path, ahead=3600)
    assert code == 0, out
    start = time.monotonic()
    code, out, _ = probe(run_cli, tmp_path / "r", shas[3], tmp_path, ahead=3600)
    assert code == 125 and "build failed" in out, out
    assert time.monotonic() - start < 30      # removed, not waited for


@pytest.mark.slow
def test_the_checkout_after_settle_is_newer_in_whole_seconds(tmp_path):
    tree = tmp_path / "build"
    (tree / "sub").mkdir(parents=True)
    out = tree / "sub" / "out.so"
    out.write_text("x")
    ahead = time.time() + 0.5
    os.utime(out, (ahead, ahead))
    assert settle([tree]) is None
    src = tmp_path / "src.c"
    src.write_text("y")             # what the checkout writes next
    assert int(src.stat().st_mtime) > int(out.stat().st_mtime)
    assert out.exists()


def test_settle_waits_only_for_the_next_second():
    waits: list[float] = []
    now = 1000.25

    def run(newest_offset: float, tree: Path) -> str | None:
        for path in (tree, tree / "f"):
            os.utime(path, (now + newest_offset, now + newest_offset))
        return settle([tree], clock=lambda: now, sleep=waits.append)

    import tempfile
    with tempfile.TemporaryDirectory() as d:
        tree = Path(d) / "build"
        tree.mkdir()
        (tree / "f").write_text("")
        assert run(-5.0, tree) is None and waits == []          # an old tree: no wait
        assert run(-0.1, tree) is None                           # this second: wait for 1001
        assert abs(waits[-1] - (1001.02 - now)) < 1e-6
        assert run(0.5, tree) is None                            # 1000.75: still this second
        assert abs(waits[-1] - (1001.02 - now)) < 1e-6
        assert run(1.0, tree) is None                            # next second: wait for 1002
        assert abs(waits[-1] - (1002.02 - now)) < 1e-6
        assert len(waits) == 3
        note = run(SKEW_LIMIT_S + 2, tree)
        assert note and "ahead of this host's clock" in note and len(waits) == 3
        assert tree.is_dir() and not any(tree.iterdir())


def test_newest_mtime_sees_nested_files_and_skips_git(tmp_path):
    assert newest_mtime([tmp_path / "missing"]) is None
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    deep, git = tmp_path / "a" / "b" / "f", tmp_path / ".git" / "index"
    deep.write_text("")
    git.write_text("")
    for path in (tmp_path, tmp_path / "a", tmp_path / "a" / "b"):
        os.utime(path, (100, 100))
    os.utime(deep, (200, 200))
    os.utime(git, (900, 900))
    assert newest_mtime([tmp_path]) == 200
