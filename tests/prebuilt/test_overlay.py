"""Overlay probes: the rule on real diffs of generated repositories, the choice of base,
and the patched wheel (RECORD, adds, renames, deletes, refusals), installed by real pip."""
from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bisect_ngc.core.artifacts import ArtifactStore
from bisect_ngc.vcs.history import History
from bisect_ngc.prebuilt.overlay import (OVERLAY_COST, Decision, OverlayRule, RuleError, choose_base,
                                         decide)
from bisect_ngc.prebuilt.wheel_overlay import OverlayRefused, Overlays, overlay_wheel, wheel_path

from tests.lib.repos import MIXED_RULE, make_mixed_repo
from tests.lib.properties import examples

PYTORCH = OverlayRule.parse(["pytorch"])

BASE_FILES = {
    "setup.py": "setup()\n", "pyproject.toml": "[build-system]\n", "requirements.txt": "x\n",
    "CMakeLists.txt": "project(torch)\n", "cmake/Dependencies.cmake": "# deps\n",
    "torch/__init__.py": "import torch._C\n", "torch/version.py": "git_version = 'abc'\n",
    "torch/nn/modules/linear.py": "class Linear: pass\n", "torch/old.py": "OLD = 1\n",
    "torch/utils/foo.py": "FOO = 1\n", "torch/csrc/autograd/init.cpp": "int x;\n",
    "torch/csrc/api/gen.py": "# a script under csrc\n",
    "torch/_C/_VariableFunctions.pyi.in": "# stub template\n",
    "torchgen/model.py": "MODEL = 1\n", "tools/autograd/derivatives.yaml": "- name: x\n",
    "aten/src/ATen/native/native_functions.yaml": "- func: add\n",
    "test/test_nn.py": "def test(): pass\n", "test/helper.py": "HELP = 1\n",
    "docs/source/index.md": "# docs\n",
}


def _data(text: str) -> bytes:
    raw = text.encode()
    return b"data %d\n" % len(raw) + raw + b"\n"


def _commit(mark: int, parent: int | None, ops: list[str], files: dict[str, str]) -> bytes:
    out = b"commit refs/heads/main\nmark :%d\n" % mark
    out += b"committer Dev <dev@example.com> %d +0000\n" % (1_700_000_000 + mark)
    out += _data(f"step {mark}")
    if parent:
        out += b"from :%d\n" % parent
    for op in ops:
        out += op.encode() + b"\n"
    for name, text in files.items():
        out += f"M 644 inline {name}\n".encode() + _data(text)
    return out


def diff_of(tmp_path: Path, ops: list[str], files: dict[str, str]) -> list:
    """The changes of one commit made on top of a PyTorch-shaped base commit."""
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    stream = _commit(1, None, [], BASE_FILES) + _commit(2, 1, ops, files)
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=stream, check=True)
    history = History.open(str(repo), tmp_path / "cache")
    return history.changes("main~1", "main")


SUB = "M 160000 " + "1" * 40 + " third_party/pybind11"

CASES = [
    # (what, fast-import ops, files, safe, replaced, deleted)
    ("a shipped module edited", [], {"torch/nn/modules/linear.py": "class Linear: x = 2\n"},
     True, ["torch/nn/modules/linear.py"], []),
    ("a module added", [], {"torch/_dynamo/new.py": "NEW = 1\n"}, True,
     ["torch/_dynamo/new.py"], []),
    ("a module deleted", ["D torch/old.py"], {}, True, [], ["torch/old.py"]),
    ("a module renamed inside torch/", ["R torch/utils/foo.py torch/utils/bar.py"], {}, True,
     ["torch/utils/bar.py"], ["torch/utils/foo.py"]),
    ("a test helper moved into torch/", ["R test/helper.py torch/testing/helper.py"], {}, True,
     ["torch/testing/helper.py"], []),
    ("tests and docs only", [], {"test/test_nn.py": "def test(): assert 1\n",
                                 "docs/source/index.md": "# more docs\n"}, True, [], []),
    ("C++ source", [], {"torch/csrc/autograd/init.cpp": "int y;\n"}, False, [], []),
    ("a .py under torch/csrc", [], {"torch/csrc/api/gen.py": "# changed\n"}, False, [], []),
    ("torchgen", [], {"torchgen/model.py": "MODEL = 2\n"}, False, [], []),
    ("tools/ YAML", [], {"tools/autograd/derivatives.yaml": "- name: y\n"}, False, [], []),
    ("native_functions.yaml", [], {"aten/src/ATen/native/native_functions.yaml": "- f\n"},
     False, [], []),
    (".pyi.in template", [], {"torch/_C/_VariableFunctions.pyi.in": "# new\n"}, False, [], []),
    ("generated version.py", [], {"torch/version.py": "git_version = 'def'\n"}, False, [], []),
    ("setup.py", [], {"setup.py": "setup(x=1)\n"}, False, [], []),
    ("pyproject.toml", [], {"pyproject.toml": "[tool]\n"}, False, [], []),
    ("requirements", [], {"requirements.txt": "y\n"}, False, [], []),
    ("CMake", [], {"cmake/Dependencies.cmake": "# more\n"}, False, [], []),
    ("a submodule pointer", [SUB], {}, False, [], []),
    ("a symlink", ["M 120000 inline torch/link.py", "data 6", "old.py"], {}, False, [], []),
    ("a shipped module moved out to tools/", ["R torch/utils/foo.py tools/foo.py"], {}, False,
     [], []),
    ("a safe edit next to an unsafe one", [], {"torch/nn/modules/linear.py": "# x\n",
                                               "CMakeLists.txt": "project(x)\n"}, False, [], []),
]


@pytest.mark.parametrize("what,ops,files,safe,replaced,deleted", CASES,
                         ids=[c[0] for c in CASES])
def test_the_pytorch_rule_on_real_diffs(tmp_path, what, ops, files, safe, replaced, deleted):
    d = decide(diff_of(tmp_path, ops, files), PYTORCH)
    assert d.safe is safe, d.reason
    if safe:
        assert sorted(d.replace) == sorted(replaced) and sorted(d.delete) == sorted(deleted)
    else:
        assert d.reason


def test_rules_parse_with_clear_errors():
    rule = OverlayRule.parse(["ships:pkg/*.py", "never:pkg/_version.py", "inert:tests/*"])
    assert rule.kind("pkg/a/b.py") == "ships" and rule.kind("pkg/_version.py") == "build"
    assert rule.kind("tests/x.py") == "inert" and rule.kind("src/x.c") == "build"
    assert "torch/*.py" in OverlayRule.parse(["pytorch"]).ships
    for bad in (["pkg/*.py"], ["often:pkg/*.py"], ["ships:"], ["inert:tests/*"]):
        with pytest.raises(RuleError):
            OverlayRule.parse(bad)


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(0, 60), st.sets(st.integers(0, 60), max_size=12),
       st.sets(st.integers(0, 60), max_size=12), st.integers(0, 60), st.integers(0, 60))
def test_the_base_is_the_nearest_safe_one_on_the_expected_side(target, built, unsafe, a, b):
    lo, hi = min(a, b, target), max(a, b, target)
    pick = choose_base(target, built, lambda x: Decision(x not in unsafe, "r"), lo, hi,
                       limit=100)
    safe = [x for x in built if x != target and x not in unsafe]
    if not safe:
        assert pick is None
        return
    best = min(abs(x - target) for x in safe)
    assert abs(pick.index - target) == best and pick.index not in unsafe
    if {target - best, target + best} <= set(safe) and best:
        expect_old = target - lo <= hi - target
        assert (pick.index < target) is expect_old


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def make_wheel(path: Path, files: dict[str, bytes], dist: str = "pkg-0.1") -> Path:
    files = dict(files)
    files[f"{dist}.dist-info/METADATA"] = b"Metadata-Version: 2.1\nName: pkg\nVersion: 0.1\n"
    files[f"{dist}.dist-info/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: test\n"
                                        b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = [_record_line(n, d) for n, d in files.items()] + [f"{dist}.dist-info/RECORD,,"]
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{dist}.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def check_record(wheel: Path) -> dict[str, bytes]:
    """Every file is in RECORD with its true hash and size, and nothing else is."""
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if not n.endswith("/")]
        record = next(n for n in names if n.endswith("RECORD"))
        rows = z.read(record).decode().split()
        assert sorted(r.split(",")[0] for r in rows) == sorted(names)
        for row in rows:
            name = row.split(",")[0]
            if name != record:
                assert row == _record_line(name, z.read(name))
        return {n: z.read(n) for n in names}


@pytest.mark.slow
def test_overlay_wheel_replaces_adds_renames_and_deletes(tmp_path):
    base = make_wheel(tmp_path / "pkg-0.1-py3-none-any.whl",
                      {"pkg/__init__.py": b"from .a import A\n", "pkg/a.py": b"A = 1\n",
                       "pkg/old.py": b"OLD = 1\n", "pkg/sub/m.py": b"M = 1\n"})
    source = {"src/pkg/a.py": b"A = 1\n", "src/pkg/old.py": b"OLD = 1\n",
              "src/pkg/sub/m.py": b"M = 1\n"}
    out = tmp_path / "out" / base.name
    out.parent.mkdir()
    written = overlay_wheel(base, out, replace={"src/pkg/a.py": b"A = 2\n",
                                                "src/pkg/sub/new.py": b"NEW = 1\n",
                                                "src/pkg/sub/m2.py": b"M = 1\n"},
                            delete=("src/pkg/old.py", "src/pkg/sub/m.py"),
                            original=source.__getitem__)
    assert written == ["pkg/a.py", "pkg/old.py", "pkg/sub/m.py", "pkg/sub/m2.py",
                       "pkg/sub/new.py"]
    files = check_record(out)
    assert files["pkg/a.py"] == b"A = 2\n" and files["pkg/sub/new.py"] == b"NEW = 1\n"
    assert "pkg/old.py" not in files and "pkg/sub/m.py" not in files
    # Real pip takes it.
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    "--target", str(target), str(out)], check=True)
    assert (target / "pkg" / "a.py").read_bytes() == b"A = 2\n"
    assert not (target / "pkg" / "old.py").exists()


def test_overlay_wheel_refuses_a_file_the_build_changed(tmp_path):
    base = make_wheel(tmp_path / "pkg-0.1-py3-none-any.whl",
                      {"pkg/config.py": b"OFFSET = 0\n"})
    with pytest.raises(OverlayRefused, match="differs from its source"):
        overlay_wheel(base, tmp_path / "x.whl", replace={"pkg/config.py": b"OFFSET = @X@ + 1\n"},
                      delete=(), original=lambda p: b"OFFSET = @X@\n")
    with pytest.raises(OverlayRefused, match="cannot tell where"):
        overlay_wheel(base, tmp_path / "y.whl", replace={"other/z.py": b""}, delete=(),
                      original=lambda p: b"")


def test_wheel_paths_follow_the_layout():
    names = {"torch/nn/linear.py", "pkg/a.py"}
    dirs = {"torch", "torch/nn", "pkg"}
    assert wheel_path("torch/nn/linear.py", names, dirs) == "torch/nn/linear.py"
    assert wheel_path("torch/newpkg/__init__.py", names, dirs) == "torch/newpkg/__init__.py"
    assert wheel_path("src/pkg/b.py", names, dirs) == "pkg/b.py"
    assert wheel_path("elsewhere/x.py", names, dirs) is None


def zip_build(history: History, sha: str, out: Path) -> None:
    """A stand-in build of the mixed package: its Python files at sha, config.py stamped
    the way setup.py stamps it (the real build runs in the Docker tests)."""
    tree = history.repo.commit(sha).tree
    files = {}
    for blob in tree.traverse():
        if blob.type == "blob" and blob.path.startswith("mixpkg/") and blob.path.endswith(".py"):
            files[blob.path] = blob.data_stream.read()
    offset = (tree / "gen/offset.txt").data_stream.read().decode().strip()
    files["mixpkg/config.py"] = files["mixpkg/config.py"].replace(b"@OFFSET@", offset.encode())
    make_wheel(out / "mixpkg-0.1-py3-none-any.whl", files, "mixpkg-0.1")


def test_overlays_find_python_only_neighbours_and_write_the_wheel(tmp_path):
    shas = make_mixed_repo(tmp_path / "r", 16, 9, set(range(6, 12)))
    history = History.open(str(tmp_path / "r"), tmp_path / "cache")
    store = ArtifactStore(tmp_path / "store")
    ov = Overlays(history, store, shas, "img", "bk", OverlayRule.parse(MIXED_RULE))
    key = ArtifactStore.key(shas[5], "img", "bk")     # commit 5 is built
    with store.staging(key) as staging:
        zip_build(history, shas[5], staging)
        store.publish(key, staging, {"commit": shas[5]})
    # 6..11 are Python-only: each is reachable from 5 only while every commit between is.
    assert ov.cheap(0, 15, {0: None, 15: None}) == {i: OVERLAY_COST for i in range(6, 12)}
    assert ov.cheap(0, 8, {}) == {i: OVERLAY_COST for i in range(6, 8)}
    src = ov.source(9, 5, 12)
    assert src.tier == "overlay" and src.reports == shas[5] and "4 commit(s) before" in src.why
    assert ov.make(9, src)
    art = store.get(src.ref)
    assert art.meta["overlay_of"] == shas[5] and art.key != ArtifactStore.key(shas[9], "img", "bk")
    files = check_record(next(art.path.glob("*.whl")))
    tree = history.repo.commit(shas[9]).tree
    assert files["mixpkg/logic.py"] == (tree / "mixpkg/logic.py").data_stream.read()
    assert b"DELTA = 1" in files["mixpkg/logic.py"]
    shipped = {b.path for b in tree.traverse() if b.type == "blob"
               and b.path.startswith("mixpkg/") and b.path.endswith(".py")}
    assert {n for n in files if n.endswith(".py")} == shipped
    assert ov.source(4, 0, 9) is None            # 5 is native: 4 -> 5 touches C


def test_overlays_refuse_a_file_the_build_rewrites(tmp_path):
    shas = make_mixed_repo(tmp_path / "r", 12, 7, set(range(5, 10)), kind="transformed")
    history = History.open(str(tmp_path / "r"), tmp_path / "cache")
    store = ArtifactStore(tmp_path / "store")
    said = []
    ov = Overlays(history, store, shas, "img", "bk", OverlayRule.parse(MIXED_RULE), said.append)
    key = ArtifactStore.key(shas[6], "img", "bk")
    with store.staging(key) as staging:
        zip_build(history, shas[6], staging)
        store.publish(key, staging, {"commit": shas[6]})
    src = ov.source(7, 6, 9)
    assert src is not None                        # the rule alone says config.py ships
    assert not ov.make(7, src)                    # its wheel copy says otherwise
    assert "differs from its source" in said[-1] and ov.source(7, 6, 9) is None
