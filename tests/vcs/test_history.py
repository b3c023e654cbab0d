"""Git logic on real repositories made by the tests."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from bisect_ngc.errors import UserError
from bisect_ngc.vcs.mirrors import CheckoutError
from bisect_ngc.vcs.history import History, parse_pr, validate_rev
from bisect_ngc.vcs.worktrees import Worktrees

from tests.lib.repos import make_repo


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    path = tmp_path_factory.mktemp("hist") / "r"
    shas = make_repo(path, 60, 30, side_branch_every=7)
    return path, shas


def test_candidates_follow_first_parent_oldest_first(repo, tmp_path):
    path, shas = repo
    h = History.open(str(path), tmp_path)
    cands = h.candidates(shas[5], shas[50])
    assert cands == shas[5:51]
    assert all("side" not in h.info([c])[c].title for c in cands)


def test_resolve_short_sha_tags_and_errors(repo, tmp_path):
    path, shas = repo
    h = History.open(str(path), tmp_path)
    assert h.resolve(shas[10][:10]) == shas[10]
    assert h.resolve("main~2") == shas[-3]
    with pytest.raises(UserError, match="not in"):
        h.resolve("deadbeefdeadbeef")
    with pytest.raises(UserError, match="not a valid git revision"):
        h.resolve("--upload-pack=evil")
    with pytest.raises(UserError, match="not a valid git revision"):
        h.resolve("a b")


def test_not_an_ancestor_is_a_clear_error(repo, tmp_path):
    path, shas = repo
    h = History.open(str(path), tmp_path)
    with pytest.raises(UserError, match="not an ancestor"):
        h.candidates(shas[40], shas[10])
    with pytest.raises(UserError, match="same commit"):
        h.candidates(shas[3], shas[3])


def test_metadata_and_pr_numbers(repo, tmp_path):
    path, shas = repo
    h = History.open(str(path), tmp_path)
    info = h.info([shas[3], shas[4]])
    assert info[shas[3]].title == "change 3 (#1003)" and info[shas[3]].pr == 1003
    assert info[shas[4]].pr is None
    assert info[shas[3]].author.startswith("Dev 3")
    assert info[shas[3]].date.startswith("2023-")


def test_present_answers_many_revisions_without_fetching(repo, tmp_path):
    path, shas = repo
    h = History.open(str(path), tmp_path)
    tree = subprocess.run(["git", "-C", str(path), "rev-parse", f"{shas[2]}^{{tree}}"],
                          capture_output=True, text=True, check=True).stdout.strip()
    revs = [shas[1], shas[7][:10], "main~1", "deadbeef" * 5, tree, "--upload-pack=x"]
    assert h.present(revs) == {shas[1]: shas[1], shas[7][:10]: shas[7], "main~1": shas[-2],
                               "deadbeef" * 5: None, tree: None, "--upload-pack=x": None}


def test_titles_join_a_wrapped_first_paragraph_as_git_does(tmp_path):
    git = ["git", "-C", str(tmp_path), "-c", "user.name=A", "-c", "user.email=a@b"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m",
                    "Fix  the thing\nacross two lines\n\nBody (#77)"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    expected = subprocess.run([*git, "log", "-1", "--format=%s|%cI"], capture_output=True,
                              text=True, check=True).stdout.strip()
    info = History.open(str(tmp_path), tmp_path / "cache").info([sha])[sha]
    assert f"{info.title}|{info.date}" == expected


def test_a_title_in_the_encoding_its_commit_declares_reads_as_git_log_shows_it(tmp_path):
    git = ["git", "-C", str(tmp_path), "-c", "user.name=A", "-c", "user.email=a@b",
           "-c", "i18n.commitEncoding=ISO-8859-1"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m",
                    "café naïve (#5)".encode("latin-1")], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    info = History.open(str(tmp_path), tmp_path / "cache").info([sha])[sha]
    assert (info.title, info.pr) == ("café naïve (#5)", 5)


@pytest.mark.parametrize("message,pr", [
    ("Fix as_tensor device (#132595)", 132595),
    ("Revert \"x (#1)\" (#2)", 2),
    ("Title\n\nBody\nPull Request resolved: https://github.com/pytorch/pytorch/pull/4242\n", 4242),
    ("No PR here", None),
    ("Merge pull request #845 from someone/branch\n\nFix it", 845),
    ("Say Merge pull request #845 from x", None),
])
def test_parse_pr(message, pr):
    assert parse_pr(message) == pr


def test_validate_rev_accepts_usual_forms():
    for rev in ("v2.5.0", "main~3", "HEAD^", "origin/main", "b465a5843b", "release/2.5"):
        assert validate_rev(rev) == rev


def test_clone_url_once_and_reuse(repo, tmp_path):
    path, shas = repo
    url = f"file://{path}"
    h1 = History.open(url, tmp_path)
    assert h1.resolve(shas[20][:12]) == shas[20]
    clones = list((tmp_path / "repos").iterdir())
    h2 = History.open(url, tmp_path)
    assert list((tmp_path / "repos").iterdir()) == clones
    assert h2.git_dir == h1.git_dir


def test_missing_revision_is_fetched_into_the_clone(tmp_path):
    upstream = tmp_path / "up"
    make_repo(upstream, 5, 3)
    h = History.open(f"file://{upstream}", tmp_path / "cache")
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "later"], cwd=upstream,
                   check=True)
    new = subprocess.run(["git", "rev-parse", "HEAD"], cwd=upstream, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert h.resolve(new) == new


def test_worktrees_are_reused_per_slot(repo, tmp_path):
    path, shas = repo
    h = History.open(str(path), tmp_path)
    wts = Worktrees(h, tmp_path / "wt")
    a = wts.checkout(0, shas[1])
    (a / "junk").write_text("x")
    b = wts.checkout(0, shas[40])
    assert a == b and (b / "version.txt").read_text() == "40\n"
    assert not (b / "junk").exists()
    c = wts.checkout(1, shas[2])
    assert c != a and (c / "version.txt").read_text() == "2\n"


def test_worktrees_stay_out_of_the_users_clone(tmp_path):
    """Issue 20: the tool's worktrees never show in the user's `git worktree list`, and
    deleting the state leaves nothing stale there; slots an older version registered in
    the clone move out at their next checkout."""
    user = tmp_path / "r"
    shas = make_repo(user, 10, 5)
    git = lambda *a: subprocess.run(["git", *a], cwd=user, capture_output=True, text=True,  # noqa
                                    check=True).stdout
    before = sorted(p.name for p in (user / ".git").iterdir())
    old_slot = tmp_path / "st" / "wt" / "slot-1"
    git("worktree", "add", "--detach", str(old_slot), shas[2])      # as before the fix
    wts = Worktrees(History.open(str(user), tmp_path / "cache"), tmp_path / "st" / "wt")
    for slot, i in ((0, 3), (1, 7), (0, 8)):
        assert (wts.checkout(slot, shas[i]) / "version.txt").read_text() == f"{i}\n"
    subprocess.run(["git", "-C", str(wts.path(0)), "status", "--short"], check=True)
    git("worktree", "prune")          # the old registration's directory is now the tool's
    assert git("worktree", "list", "--porcelain").count("worktree ") == 1
    assert sorted(p.name for p in (user / ".git").iterdir()) == before
    shutil.rmtree(tmp_path / "st")
    assert git("worktree", "prune", "--dry-run", "--verbose") == ""


def test_submodules_are_initialised_and_failures_are_checkout_errors(tmp_path, monkeypatch):
    for k, v in {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "protocol.file.allow",
                 "GIT_CONFIG_VALUE_0": "always"}.items():
        monkeypatch.setenv(k, v)  # local-path submodules, as CVE-2022-39253 now needs
    sub = tmp_path / "sub"
    make_repo(sub, 3, 1)
    top = tmp_path / "top"
    make_repo(top, 2, 1)
    run = lambda *a: subprocess.run(a, cwd=top, check=True, capture_output=True)  # noqa: E731
    run("git", "submodule", "add", "-q", str(sub), "third_party/sub")
    run("git", "commit", "-q", "-m", "add submodule")
    good = subprocess.run(["git", "rev-parse", "HEAD"], cwd=top, capture_output=True, text=True).stdout.strip()
    run("git", "config", "-f", ".gitmodules", "submodule.third_party/sub.url", str(tmp_path / "gone"))
    run("git", "commit", "-q", "-am", "point submodule nowhere")
    subprocess.run(["git", "-C", "third_party/sub", "commit", "-q", "--allow-empty", "-m", "x"], cwd=top, check=True)
    run("git", "commit", "-q", "-am", "bump submodule to an unpublished commit")
    bad = subprocess.run(["git", "rev-parse", "HEAD"], cwd=top, capture_output=True, text=True).stdout.strip()
    h = History.open(str(top), tmp_path)
    wts = Worktrees(h, tmp_path / "wt")
    wt = wts.checkout(0, good)
    assert (wt / "third_party/sub/version.txt").read_text() == "2\n"
    with pytest.raises(CheckoutError, match="submodule"):
        wts.checkout(0, bad)


def test_a_blobless_clone_fetches_the_range_once_and_then_needs_no_network(tmp_path):
    upstream = tmp_path / "up"
    shas = make_repo(upstream, 40, 20)
    for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
        subprocess.run(["git", "-C", str(upstream), "config", key, "true"], check=True)
    h = History.open(f"file://{upstream}", tmp_path / "cache")
    assert h.is_partial() and h.missing(shas[5], shas[-1])
    assert h.prefetch(shas[5], shas[-1]) > 0
    assert h.missing(shas[5], shas[-1]) == [] and h.prefetch(shas[5], shas[-1]) == 0
    shutil.move(upstream, tmp_path / "gone")       # no remote from here on
    wts = Worktrees(h, tmp_path / "wt")
    for i in (5, 39, 20, 12):
        assert (wts.checkout(0, shas[i]) / "version.txt").read_text() == f"{i}\n"
