"""--with and --component on the real Docker engine (issue 23), with the generated
repositories of tests/lib/companion_repos.py (a torch stand-in whose compiled ABI
changes at a known commit, and a companion that compiles against its headers and refuses
another ABI on import), built into wheels inside the test image. Not proven here: a
real TE build (CUDA toolkit and cuDNN headers), which tests/companions/test_specs.py covers
only as rendered text.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.lib.companion_repos import repos  # noqa: F401 (a fixture)
from tests.lib.companion_repos import (ABI_CHANGE, BROKEN, BUILD, NEW_FROM, TEST, WHEEL,
                                        WITH_BUILD, commit, git)

from tests.lib.docker_engine import IMAGE, PROBLEM, docker_client

pytestmark = [pytest.mark.docker, pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")]




def bisect(run_cli, repos, tmp_path, *extra, test=TEST, state="st"):
    torch, shas, comp = repos
    return run_cli(["bisect", "--repo", torch, "--old", shas[0], "--new", shas[-1],
                    "--backend", "docker", "--image", IMAGE, "--gpus", "none",
                    "--build", BUILD, "--test", test, "--state", tmp_path / state,
                    "--cache-dir", tmp_path / "cache", "--quiet", "--json", *extra])


def probes(tmp_path, session, state="st"):
    from bisect_ngc.core.store import Store
    return Store(tmp_path / state).probes(session)


def test_the_companion_is_rebuilt_for_each_probed_torch_and_cached(repos, tmp_path, run_cli):
    torch, shas, comp = repos
    spec = f"git+{comp}@v1.0{WITH_BUILD}"
    code, out, err = bisect(run_cli, repos, tmp_path, "--with", spec)
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[NEW_FROM], (res, err)
    tested = [p for p in probes(tmp_path, res["session"]) if p.verdict in ("pass", "fail")]
    # one companion build per probed torch, across the ABI change
    built = {p.idx for p in tested if p.details.get("companions_built")}
    assert built == {p.idx for p in tested}
    assert any(i < ABI_CHANGE for i in built) and any(i >= ABI_CHANGE for i in built)
    env = tested[0].details["environment"]
    assert env["layers"][-1] == {"kind": "wheel", "what": "companion",
                                 "source": f"companion@{git(comp, 'rev-parse', 'v1.0')[:12]}"}
    md = Path(res["report"]).read_text()
    assert f"`companion@{git(comp, 'rev-parse', 'v1.0')[:12]}`" in md and "`--with`" in md
    # Another question (another test command) on the same cache: neither is built again.
    again_code, again_out, err = bisect(run_cli, repos, tmp_path, "--with", spec,
                                        test="true && " + TEST, state="st2")
    again = json.loads(again_out)
    assert again_code == 0 and again["first_new"] == shas[NEW_FROM], err
    assert again["builds"] == 0
    assert not any(p.details.get("companions_built") for p in probes(tmp_path, again["session"],
                                                                      "st2"))


def test_a_companion_that_does_not_build_is_a_skip_with_its_reason(repos, tmp_path, run_cli):
    torch, shas, comp = repos
    (bad,) = BROKEN
    code, out, err = run_cli(["probe", "--commit", shas[bad], "--repo", torch, "--old", shas[0],
                              "--new", shas[-1], "--backend", "docker", "--image", IMAGE,
                              "--gpus", "none", "--build", BUILD, "--test", TEST, "--with",
                              f"git+{comp}@v1.0{WITH_BUILD}", "--state", tmp_path / "st",
                              "--cache-dir", tmp_path / "cache"])
    assert code == 125, (out, err)
    assert "companion companion@" in out and "did not build against this torch" in out
    log = next(line for line in out.splitlines() if "companion-companion log:" in line)
    assert "this torch breaks the companion" in Path(log.split(": ", 1)[1]).read_text()


def test_a_wheel_built_once_says_so_instead_of_naming_a_culprit(repos, tmp_path, run_cli):
    """Without the rebuild: the companion built for the oldest torch (ABI 1) does not
    import from the ABI change on, so those probes are skips that say why, and no commit
    is named for it."""
    torch, shas, comp = repos
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    git(torch, "worktree", "add", "-q", "--detach", str(tmp_path / "old-torch"), shas[0])
    script = ("set -e; cd /t && python3 make_wheel.py /tmp/tw && pip install -q --no-deps "
              "--break-system-packages /tmp/tw/*.whl && cp -r /c /tmp/c && cd /tmp/c && "
              "python3 make_wheel.py /w")
    docker_client().containers.run(IMAGE, ["/bin/sh", "-c", script], remove=True, volumes=[
        f"{tmp_path / 'old-torch'}:/t:ro", f"{comp}:/c:ro", f"{wheels}:/w:rw"])
    (wheel,) = wheels.glob("*.whl")
    code, out, err = bisect(run_cli, repos, tmp_path, "--with", str(wheel))
    res = json.loads(out)
    assert res["first_new"] is None and code != 0, res
    skipped = [p for p in probes(tmp_path, res["session"]) if p.verdict == "skip"]
    assert skipped and all(p.idx >= ABI_CHANGE for p in skipped)
    assert all("does not import with this torch" in p.reason and "ABI" in p.reason
               and "rebuild it for each" in p.reason for p in skipped), \
        [p.reason for p in skipped]


def test_a_rebuilt_wheel_of_the_same_name_is_probed_again(repos, tmp_path, run_cli):
    """Finding 3 of issue 30: pip writes the same file name for the same version, so a
    wheel known by its path answered from the cache after a rebuild (0 probes, exit 0)."""
    from tests.lib.companion_repos import wheel
    torch, shas, comp = repos
    out = tmp_path / "kit"
    path = wheel(out, "kit", "1.0", {"kit/__init__.py": b"ok = True\n"}, purelib=True)
    test = ('python3 -c "import kit, sys; sys.exit(0 if kit.ok else 125)" && python3 -c '
            '"import torch, sys; sys.exit(torch.behaviour != \'old\')"')
    code, first, err = bisect(run_cli, repos, tmp_path, "--with", str(path), test=test)
    assert code == 0 and json.loads(first)["first_new"] == shas[NEW_FROM], err
    path.unlink()
    assert wheel(out, "kit", "1.0", {"kit/__init__.py": b"ok = False\n"}, purelib=True) == path
    code, again, err = bisect(run_cli, repos, tmp_path, "--with", str(path), test=test)
    res = json.loads(again)
    assert code == 3 and res["status"] == "invalid-endpoints" and res["probes"] == 2, res
    assert res["cached"] == 0 and res["builds"] == 0         # torch's builds are reused


@pytest.mark.parametrize("spec,says", [
    ("git+{comp}@no-such-tag", "revision 'no-such-tag' is not in"),
    ("nonsense@v1", "'nonsense' is not a preset"),
    ("a b c", "not a companion SPEC"),
])
def test_bad_companions_are_one_sentence(repos, tmp_path, run_cli, spec, says):
    code, _, err = bisect(run_cli, repos, tmp_path, "--with", spec.format(comp=repos[2]))
    assert code == 2 and says in err and "hint" in err.lower(), err


def test_with_on_another_backend_is_refused(repos, tmp_path, run_cli):
    torch, shas, comp = repos
    code, _, err = run_cli(["bisect", "--repo", torch, "--old", shas[0], "--new", shas[-1],
                            "--build", BUILD, "--test", TEST, "--with", "einops==0.8.0",
                            "--state", tmp_path / "st"])
    assert code == 2 and "--with needs a container" in err


KIT_BUILD = WHEEL + '''
import os, pathlib, sys
wheel(pathlib.Path(sys.argv[1]), "kit", os.environ.get("KIT_VERSION", "0.0"), {
    "kit/__init__.py": f"behaviour = {open('behaviour').read().strip()!r}\\n".encode()})
'''


def test_component_mode_bisects_the_component_between_two_images(tmp_path, run_cli,
                                                                  monkeypatch):
    """--component kit: two release images ship kit 1.0+<old sha> and 1.1+<new sha>; the
    bisection runs over kit's commits, each built in the older image and installed over
    its kit, and names the commit that changed the behaviour."""
    from tests.lib.docker_engine import commit_image
    from tests.lib.repos import catalog
    kit = tmp_path / "kit"
    kit.mkdir()
    git(kit, "init", "-q", "-b", "main")
    shas = [commit(kit, {"make_wheel.py": KIT_BUILD, "behaviour": "old\n" if i < 13 else "new\n",
                         "counter": f"{i}\n"}, f"kit change {i}") for i in range(20)]
    wheels = tmp_path / "wheels"
    for tag, idx, version in (("92.01", 2, "1.0"), ("92.02", 18, "1.1")):
        git(kit, "checkout", "-q", shas[idx])
        subprocess.run(["python3", "make_wheel.py", str(wheels / tag)], cwd=kit, check=True,
                       env={"KIT_VERSION": f"{version}+{shas[idx][:10]}", "PATH": "/usr/bin:/bin"})
        commit_image(IMAGE, "pip install -q --no-deps --break-system-packages /w/*.whl",
                     "nvcr.io/nvidia/pytorch", f"{tag}-py3", volumes=[f"{wheels / tag}:/w:ro"])
    git(kit, "checkout", "-q", "main")
    monkeypatch.setenv("BISECT_NGC_CATALOG", str(catalog(tmp_path, [("92.01", "a" * 40),
                                                                  ("92.02", "b" * 40)])))
    try:
        code, out, err = run_cli([
            "bisect", "--from", "92.01", "--to", "92.02", "--component", "kit",
            "--component-repo", kit, "--backend", "docker", "--gpus", "none",
            "--build", 'python3 make_wheel.py "$BISECT_COMPANION_OUT"',
            "--test", 'python3 -c "import kit, sys; sys.exit(kit.behaviour != \'old\')"',
            "--state", tmp_path / "st", "--cache-dir", tmp_path / "cache", "--quiet", "--json"])
    finally:
        for tag in ("92.01", "92.02"):
            docker_client().images.remove(f"nvcr.io/nvidia/pytorch:{tag}-py3", force=True)
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[13], (res, err)
    found = probes(tmp_path, res["session"])
    built = [p for p in found if p.details["tier"] == "build"]
    # the two images as they are, then builds in the older one only
    assert {p.idx for p in found if p.details["tier"] == "image"} == {0, 16}
    assert {p.details["environment"]["base"] for p in built} == \
        {"nvcr.io/nvidia/pytorch:92.01-py3"}
    assert {p.idx for p in built} >= {0, 16}        # both shipped versions' commits, built
    assert "kit 1.0+" in Path(res["report"]).read_text()


@pytest.mark.parametrize("argv,says", [
    (["--from", "24.09", "--to", "24.10", "--component", "nosuch"],
     "--component nosuch has no preset and no --component-repo"),
    (["--repo", ".", "--old", "a", "--new", "b", "--test", "true", "--component",
      "transformer_engine"], "--component is for release mode"),
    (["--from", "24.09", "--to", "24.10", "--component-repo", "/x"],
     "--component-repo is for a component other than torch"),
])
def test_bad_component_questions_are_one_sentence(tmp_path, run_cli, argv, says):
    code, _, err = run_cli(["bisect", *argv, "--state", tmp_path / "st", "--cache-dir",
                            tmp_path / "cache"])
    assert code == 2 and says in err, err


TE_BUILD = WHEEL + '''
import os, pathlib, sys
b = open("behaviour").read().strip()
wheel(pathlib.Path(sys.argv[1]), "transformer_engine", os.environ.get("TE_VERSION", "0.0"), {
    "transformer_engine/__init__.py": f"behaviour = {b!r}\\n".encode(),
    "transformer_engine/pytorch/__init__.py": b""})
'''


def test_component_mode_lets_images_narrow_the_releases_first(tmp_path, run_cli, monkeypatch):
    """--component transformer_engine across three releases whose TE commits the catalog
    knows: the middle release's image as it is narrows the range, one swap of the newer
    image's TE into the older says TE carries it, and builds in the middle (older) image
    name TE's commit. A generated repository stands in for TE's (--component-repo)."""
    te = tmp_path / "te"
    te.mkdir()
    git(te, "init", "-q", "-b", "main")
    shas = [commit(te, {"make_wheel.py": TE_BUILD, "behaviour": "old\n" if i < 13 else "new\n",
                        "counter": f"{i}\n"}, f"te change {i}") for i in range(20)]
    releases = (("93.01", 2, "2.1"), ("93.02", 9, "2.2"), ("93.03", 18, "2.3"))
    code, out, err = te_releases(run_cli, tmp_path, te, shas, releases, monkeypatch)
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[13], (res, err)
    found = probes(tmp_path, res["session"])
    images = {p.details["environment"]["base"] for p in found if p.details["tier"] == "image"}
    assert "nvcr.io/nvidia/pytorch:93.02-py3" in images          # the middle release
    built = [p for p in found if p.details["tier"] == "build"]
    assert built and {p.details["environment"]["base"] for p in built} == \
        {"nvcr.io/nvidia/pytorch:93.02-py3"}
    assert min(p.idx for p in built) >= 7                         # only after 93.02's commit
    assert res["components"] is None or res["components"].get("status") != "found"


TE_TREE_BUILD = WHEEL + '''
import os, pathlib, sys
files = {str(p): p.read_bytes() for p in pathlib.Path("transformer_engine").rglob("*.py")}
wheel(pathlib.Path(sys.argv[1]), "transformer_engine", os.environ.get("TE_VERSION", "0.0"), files)
'''


def test_component_mode_overlays_te_python_changes(tmp_path, run_cli, monkeypatch):
    """TE's Python ships as it is: commits that change only transformer_engine/*.py are
    probed by patching a built neighbour's wheel (the `transformer_engine` overlay rule);
    the two that touch its C++ are built."""
    te = tmp_path / "te"
    (te / "transformer_engine" / "pytorch").mkdir(parents=True)
    (te / "csrc").mkdir()
    git(te, "init", "-q", "-b", "main")
    shas = []
    for i in range(20):
        files = {"make_wheel.py": TE_TREE_BUILD, "transformer_engine/pytorch/__init__.py": "",
                 "transformer_engine/__init__.py":
                     f"behaviour = {'old' if i < 13 else 'new'!r}  # change {i}\n"}
        if i in (0, 5, 15):
            files["csrc/ext.cpp"] = f"int version() {{ return {i}; }}\n"
        shas.append(commit(te, files, f"te change {i}"))
    releases = (("94.01", 2, "2.2"), ("94.02", 18, "2.18"))
    code, out, err = te_releases(run_cli, tmp_path, te, shas, releases, monkeypatch,
                                 "--no-images")
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[13], (res, err)
    tiers = {p.idx: p.details["tier"] for p in probes(tmp_path, res["session"])}
    assert "overlay" in tiers.values(), tiers
    assert res["overlays"] >= 1 and res["builds"] < len(tiers)


def te_releases(run_cli, tmp_path, te, shas, releases, monkeypatch, *extra):
    """Release images with the TE stand-in's wheel at (tag, commit index, version), a
    catalog that knows their TE commits, and `bisect --component transformer_engine`
    from the first to the last, with the images removed afterwards."""
    from tests.lib.docker_engine import commit_image
    rows = []
    for tag, idx, version in releases:
        git(te, "checkout", "-q", shas[idx])
        out = tmp_path / "wheels" / tag
        subprocess.run(["python3", "make_wheel.py", str(out)], cwd=te, check=True,
                       env={"TE_VERSION": f"{version}+{shas[idx][:7]}", "PATH": "/usr/bin:/bin"})
        commit_image(IMAGE, "pip install -q --no-deps --break-system-packages /w/*.whl",
                     "nvcr.io/nvidia/pytorch", f"{tag}-py3", volumes=[f"{out}:/w:ro"])
        rows.append(f"{tag}\t2.9.0a0+abc\t{'a' * 40}\tU\t12.9\tU\t{version}+{shas[idx][:7]}\tV1"
                    f"\t3.12\t24.04\t{shas[idx][:7]}\n")
    git(te, "checkout", "-q", "main")
    (tmp_path / "catalog.tsv").write_text(
        "release\ttorch_version\ttorch_commit\ttorch_verified\tcuda\tcuda_verified\t"
        "transformer_engine\tte_verified\tpython\tubuntu\tte_commit\n" + "".join(rows))
    monkeypatch.setenv("BISECT_NGC_CATALOG", str(tmp_path / "catalog.tsv"))
    try:
        return run_cli([
            "bisect", "--from", releases[0][0], "--to", releases[-1][0], "--component",
            "transformer_engine", "--component-repo", te, "--backend", "docker", "--gpus",
            "none", "--build", 'python3 make_wheel.py "$BISECT_COMPANION_OUT"', "--test",
            'python3 -c "import transformer_engine as t, sys; sys.exit(t.behaviour != \'old\')"',
            "--state", tmp_path / "st", "--cache-dir", tmp_path / "cache", "--quiet", "--json",
            *extra])
    finally:
        for tag, _, _ in releases:
            docker_client().images.remove(f"nvcr.io/nvidia/pytorch:{tag}-py3", force=True)
