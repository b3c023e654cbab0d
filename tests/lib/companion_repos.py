"""Generated repositories for --with (issue 23): a "torch" stand-in whose build compiles
`torch/_C.so` and ships `torch/include/abi.h` (its ABI number changes at ABI_CHANGE; the
commits in BROKEN mark their headers broken), and a "companion" whose build compiles an
extension against the installed torch's `abi.h` and whose import refuses a torch of
another ABI, as TE's does. Both build wheels with the Python standard library and gcc.
Used by tests/e2e/test_companion_builds.py, tests/e2e/test_slurm_containers.py and
benchmarks/companions.py."""
from __future__ import annotations

import base64
import hashlib
import inspect
import subprocess
import zipfile
from pathlib import Path

import pytest

N, ABI_CHANGE, NEW_FROM, BROKEN = 24, 8, 15, {11}

def wheel(out: Path, name: str, version: str, files: dict[str, bytes],
          purelib: bool = False) -> Path:
    """A py3-none-any wheel of `files` in `out`, with its RECORD. The generated
    repositories' builds run this same source (WHEEL), inside the container."""
    info = f"{name}-{version}.dist-info"
    files = dict(files)
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    files[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nRoot-Is-Purelib: {str(purelib).lower()}\n"
                              f"Tag: py3-none-any\n").encode()
    rec = [f"{k},sha256={base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b'=').decode()},"
           f"{len(v)}" for k, v in files.items()]
    files[f"{info}/RECORD"] = ("\n".join(rec + [f"{info}/RECORD,,"]) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for k, v in files.items():
            z.writestr(k, v)
    return path


WHEEL = ("import base64, hashlib, zipfile\nfrom pathlib import Path\n" +
         inspect.getsource(wheel))

TORCH_BUILD = WHEEL + '''
import os, pathlib, subprocess, sys, tempfile
abi, behaviour = open("abi").read().strip(), open("behaviour").read().strip()
tmp = pathlib.Path(tempfile.mkdtemp())
(tmp / "abi.c").write_text(f"int torch_abi(void) {{ return {abi}; }}\\n")
subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp / "_C.so"), str(tmp / "abi.c")], check=True)
header = f"#define TORCH_ABI {abi}\\n" + ("#define TORCH_BROKEN 1\\n" if os.path.exists("broken") else "")
wheel(pathlib.Path(sys.argv[1]), "torch", "2.99.0", {
    "torch/__init__.py": ("import ctypes, os\\nABI = ctypes.CDLL(os.path.join(os.path.dirname("
                          f"__file__), '_C.so')).torch_abi()\\nbehaviour = {behaviour!r}\\n").encode(),
    "torch/include/abi.h": header.encode(), "torch/_C.so": (tmp / "_C.so").read_bytes()})
'''

COMPANION_INIT = '''import ctypes, os, torch
_built_for = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "_ext.so")).built_for()
if _built_for != torch.ABI:
    raise ImportError(f"undefined symbol: built for torch ABI {_built_for}, this torch has {torch.ABI}")
def check():
    return torch.behaviour
'''

COMPANION_BUILD = WHEEL + '''
import os, pathlib, subprocess, sys, torch
inc = os.path.join(os.path.dirname(torch.__file__), "include")
subprocess.run(["gcc", "-shared", "-fPIC", "-I", inc, "-o", "_ext.so", "ext.c"], check=True)
wheel(pathlib.Path(sys.argv[1]), "companion", "1.0", {
    "companion/__init__.py": open("init.py", "rb").read(),
    "companion/_ext.so": open("_ext.so", "rb").read()})
'''

EXT_C = ('#include "abi.h"\n#ifdef TORCH_BROKEN\n#error this torch breaks the companion\n'
         '#endif\nint built_for(void) { return TORCH_ABI; }\n')

BUILD = 'python3 make_wheel.py "$BISECT_ARTIFACTS"'
WITH_BUILD = '#build=python3 make_wheel.py "$BISECT_COMPANION_OUT"'
TEST = 'python3 -c "import companion, sys; sys.exit(companion.check() != \'old\')"'


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str, remove: tuple[str, ...] = ()) -> str:
    for name, text in files.items():
        (repo / name).write_text(text)
    for name in remove:
        (repo / name).unlink(missing_ok=True)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def make_companion_repos(root: Path) -> tuple[Path, list[str], Path]:
    """(torch repo, its shas oldest first, companion repo with tag v1.0) under root."""
    torch, comp = root / "torch", root / "companion"
    for repo in (torch, comp):
        repo.mkdir(parents=True)
        git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(N):
        files = {"abi": f"{1 if i < ABI_CHANGE else 2}\n",
                 "behaviour": "old\n" if i < NEW_FROM else "new\n", "make_wheel.py": TORCH_BUILD,
                 "counter": f"{i}\n"}
        if i in BROKEN:
            files["broken"] = "1\n"
        shas.append(commit(torch, files, f"change {i}",
                           remove=() if i in BROKEN else ("broken",)))
    commit(comp, {"make_wheel.py": COMPANION_BUILD, "init.py": COMPANION_INIT, "ext.c": EXT_C},
           "companion 1.0")
    git(comp, "tag", "v1.0")
    return torch, shas, comp


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    """(torch repo, its shas oldest first, companion repo)."""
    return make_companion_repos(tmp_path_factory.mktemp("companion-repos"))
