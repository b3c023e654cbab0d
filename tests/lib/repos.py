"""Real git repositories for the tests and benchmarks, generated with `git fast-import`."""
from __future__ import annotations

import subprocess
from pathlib import Path

BUILD = "test ! -e broken && cp behaviour \"$BISECT_ARTIFACTS/out\""
TEST = "test \"$(cat \"$BISECT_ARTIFACTS/out\")\" = old"


def _data(text: str) -> bytes:
    raw = text.encode()
    return b"data %d\n" % len(raw) + raw + b"\n"


def make_repo(path: Path, n: int, transition: int, unbuildable: set[int] = frozenset(),
              side_branch_every: int = 0, pr_every: int = 3) -> list[str]:
    """A history of n first-parent commits; commit i >= transition has the new behaviour.

    Returns the first-parent shas, oldest first. Commits in `unbuildable` carry a
    file `broken` that makes BUILD fail. With side_branch_every=k, every
    k-th commit is a merge of a one-commit side branch.
    """
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    out = bytearray()
    mark = 0
    marks = []
    for i in range(n):
        ts = 1_700_000_000 + i * 60
        side = None
        if side_branch_every and i and i % side_branch_every == 0:
            mark += 1
            side = mark
            out += b"commit refs/heads/side\nmark :%d\n" % side
            out += b"author Side <side@example.com> %d +0000\n" % ts
            out += b"committer Side <side@example.com> %d +0000\n" % ts
            out += _data(f"side work {i}")
            out += b"from :%d\n" % marks[-1]
            out += b"M 644 inline side.txt\n" + _data(f"side {i}\n")
        mark += 1
        title = f"change {i}" + (f" (#{1000 + i})" if pr_every and i % pr_every == 0 else "")
        out += b"commit refs/heads/main\nmark :%d\n" % mark
        out += b"author Dev %d <dev%d@example.com> %d +0000\n" % (i % 7, i % 7, ts)
        out += b"committer Dev <dev@example.com> %d +0000\n" % ts
        out += _data(title)
        if marks:
            out += b"from :%d\n" % marks[-1]
        if side:
            out += b"merge :%d\n" % side
        out += b"M 644 inline behaviour\n" + _data("old\n" if i < transition else "new\n")
        out += b"M 644 inline version.txt\n" + _data(f"{i}\n")
        if i in unbuildable:
            out += b"M 644 inline broken\n" + _data("x\n")
        elif i - 1 in unbuildable:
            out += b"D broken\n"
        marks.append(mark)
    subprocess.run(["git", "fast-import", "--quiet"], cwd=path, input=bytes(out), check=True)
    subprocess.run(["git", "reset", "-q", "--hard", "main"], cwd=path, check=True)
    shas = subprocess.run(["git", "rev-list", "--first-parent", "--reverse", "main"], cwd=path,
                          check=True, capture_output=True, text=True).stdout.split()
    return shas


CEXT_BUILD = 'CC="ccache gcc" python3 setup.py -q bdist_wheel -d "$BISECT_ARTIFACTS"'
# A wheel that does not install or import is "cannot test" (125), never "new behaviour".
CEXT_TEST = ('pip install -q --no-deps --force-reinstall --no-index "$BISECT_ARTIFACTS"/fastmod-*.whl'
             ' && cd / && python3 -c "import fastmod" || exit 125;'
             ' python3 -c "import fastmod, sys; sys.exit(fastmod.answer() != 41)"')

_SETUP = """from setuptools import Extension, setup
setup(name="fastmod", version="0.1",
      ext_modules=[Extension("fastmod", ["fastmod.c"] + {extra})])
"""

_MODULE = """#include <Python.h>
#define ANSWER {answer}
#define REVISION {revision}
{broken}
static PyObject *answer(PyObject *self, PyObject *args) {{ return PyLong_FromLong(ANSWER); }}
static PyObject *revision(PyObject *self, PyObject *args) {{ return PyLong_FromLong(REVISION); }}
static PyMethodDef methods[] = {{
    {{"answer", answer, METH_NOARGS, "41 before the change, 42 after"}},
    {{"revision", revision, METH_NOARGS, "the commit index"}},
    {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "fastmod", NULL, -1, methods}};
PyMODINIT_FUNC PyInit_fastmod(void) {{ return PyModule_Create(&module); }}
"""


def _heavy_source(functions: int) -> str:
    body = "\n".join(f"double heavy_{i}(double x) {{ double s = 0; for (int k = 0; k < {i % 17 + 3}; k++)"
                     f" s += x * k / (k + {i + 1}.0); return s; }}" for i in range(functions))
    return "/* unchanged across commits: ccache food */\n" + body + "\n"


def make_cext_repo(path: Path, n: int, transition: int, unbuildable: set[int] = frozenset(),
                   heavy: int = 0) -> list[str]:
    """A Python package with a C extension; `fastmod.answer()` is 41 before `transition`
    and 42 from it on. Commits in `unbuildable` do not compile. With heavy=N, a large
    C file that never changes is part of every build."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    extra = '["heavy.c"]' if heavy else "[]"
    out = bytearray()
    for i in range(n):
        ts = 1_700_000_000 + i * 60
        out += b"commit refs/heads/main\nmark :%d\n" % (i + 1)
        out += b"author Dev <dev@example.com> %d +0000\ncommitter Dev <dev@example.com> %d +0000\n" % (ts, ts)
        out += _data(f"fastmod: step {i}" + (f" (#{2000 + i})" if i % 2 else ""))
        if i:
            out += b"from :%d\n" % i
        else:
            out += b"M 644 inline setup.py\n" + _data(_SETUP.format(extra=extra))
            if heavy:
                out += b"M 644 inline heavy.c\n" + _data(_heavy_source(heavy))
        src = _MODULE.format(answer=42 if i >= transition else 41, revision=i,
                             broken="this is not C;" if i in unbuildable else "")
        out += b"M 644 inline fastmod.c\n" + _data(src)
    subprocess.run(["git", "fast-import", "--quiet"], cwd=path, input=bytes(out), check=True)
    subprocess.run(["git", "reset", "-q", "--hard", "main"], cwd=path, check=True)
    return subprocess.run(["git", "rev-list", "--first-parent", "--reverse", "main"], cwd=path,
                          check=True, capture_output=True, text=True).stdout.split()


# --- a compiled package with Python-only commits (overlay probes) --------------------------

MIXED_BUILD = 'CC="ccache gcc" python3 setup.py -q bdist_wheel -d "$BISECT_ARTIFACTS"'
# It prints the commit the wheel was built from, as the repro prints torch's git version
# (what --check-torch-commit checks).
MIXED_TEST = ('pip install -q --no-deps --force-reinstall --no-index "$BISECT_ARTIFACTS"/mixpkg-*.whl'
              ' && cd / && python3 -c "import mixpkg" || exit 125;'
              ' python3 -c "import json, sys, mixpkg, mixpkg._version as v;'
              ' print(json.dumps({\'torch_git_version\': v.git_version}));'
              ' sys.exit(mixpkg.answer() != 41)"')
# What ships as it is: the package's Python; gen/ is a build input, tests never ship.
MIXED_RULE = ("ships:mixpkg/*.py", "inert:tests/*")
TRANSITION_KINDS = ("py", "codegen", "transformed")

_MIXED_SETUP = """import os
import pathlib
from setuptools import Extension, setup
from setuptools.command.build_py import build_py


class stamped(build_py):
    # mixpkg/_version.py is generated: the commit built, as torch/version.py is.
    def run(self):
        super().run()
        out = pathlib.Path(self.build_lib, "mixpkg", "_version.py")
        out.write_text(f"git_version = {os.environ.get('BISECT_COMMIT', 'unknown')!r}\\n")

    # mixpkg/config.py ships rewritten: @OFFSET@ becomes gen/offset.txt's number. Always
    # from the source: a kept build/ holds last commit's stamped copy.
    def build_module(self, module, module_file, package):
        out = super().build_module(module, module_file, package)
        if module == "config":
            offset = pathlib.Path("gen/offset.txt").read_text().strip()
            text = pathlib.Path(module_file).read_text().replace("@OFFSET@", offset)
            pathlib.Path(out[0]).write_text(text)
        return out


setup(name="mixpkg", version="0.1", packages=["mixpkg"], cmdclass={"build_py": stamped},
      ext_modules=[Extension("mixpkg._fast", ["mixpkg/_fast.c"])])
"""

_MIXED_C = """#include <Python.h>
#define REVISION {revision}
static PyObject *base(PyObject *self, PyObject *args) {{ return PyLong_FromLong(41); }}
static PyMethodDef methods[] = {{{{"base", base, METH_NOARGS, "41"}}, {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods}};
PyMODINIT_FUNC PyInit__fast(void) {{ return PyModule_Create(&module); }}
"""

_MIXED_INIT = """from . import _fast, config, logic


def answer():
    return _fast.base() + logic.DELTA + config.OFFSET + config.EXTRA
"""


def make_mixed_repo(path: Path, n: int, transition: int, python_only: set[int],
                    kind: str = "py") -> list[str]:
    """A package with a C extension where `mixpkg.answer()` is 41 before `transition` and
    42 from it on. Commits in `python_only` change only mixpkg/*.py (and tests/): they
    edit logic.py and, in turn, add, rename and delete small modules, as real Python-only
    commits do. The others edit the C source. How the transition commit changes the answer:

    py           logic.py's DELTA becomes 1 (an overlay is safe);
    codegen      gen/offset.txt, a build input, becomes 1 (needs a build);
    transformed  config.py, which the build rewrites, adds 1 (the rule calls it shipped,
                 but its wheel copy differs from git: the overlay must refuse).
    """
    if kind not in TRANSITION_KINDS:
        raise ValueError(kind)
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    out = bytearray()
    extras: list[str] = []
    for i in range(n):
        ts = 1_700_000_000 + i * 60
        new = i >= transition
        out += b"commit refs/heads/main\nmark :%d\n" % (i + 1)
        out += b"author Dev <dev@example.com> %d +0000\ncommitter Dev <dev@example.com> %d +0000\n" % (ts, ts)
        what = "python" if i in python_only else "native"
        out += _data(f"mixpkg: {what} step {i}" + (f" (#{3000 + i})" if i % 2 else ""))
        files: dict[str, str] = {}
        if i:
            out += b"from :%d\n" % i
        else:
            files = {"setup.py": _MIXED_SETUP, "mixpkg/__init__.py": _MIXED_INIT,
                     "gen/offset.txt": "0\n", "mixpkg/_fast.c": _MIXED_C.format(revision=0)}
        if i == 0 or i == transition or (i in python_only and i != transition):
            files["mixpkg/logic.py"] = (f"# revision {i}\nDELTA = "
                                        f"{1 if new and kind == 'py' else 0}\n")
        if i == 0 or (i == transition and kind == "transformed"):
            files["mixpkg/config.py"] = ("OFFSET = @OFFSET@\nEXTRA = "
                                         f"{1 if new and kind == 'transformed' else 0}\n")
        if i == transition and kind == "codegen":
            files["gen/offset.txt"] = "1\n"
        if i in python_only and i != transition:
            files[f"tests/test_{i}.py"] = f"def test_{i}():\n    pass\n"
            if i % 3 == 0 or not extras:
                extras.append(f"mixpkg/extra_{i}.py")
                files[extras[-1]] = f"STEP = {i}\n"
            elif i % 3 == 1:
                old, extras[-1] = extras[-1], f"mixpkg/extra_{i}_renamed.py"
                out += f"R {old} {extras[-1]}\n".encode()
            else:
                out += f"D {extras.pop()}\n".encode()
        elif i and i != transition:
            files["mixpkg/_fast.c"] = _MIXED_C.format(revision=i)
        for name, text in files.items():
            out += f"M 644 inline {name}\n".encode() + _data(text)
    subprocess.run(["git", "fast-import", "--quiet"], cwd=path, input=bytes(out), check=True)
    subprocess.run(["git", "reset", "-q", "--hard", "main"], cwd=path, check=True)
    return subprocess.run(["git", "rev-list", "--first-parent", "--reverse", "main"], cwd=path,
                          check=True, capture_output=True, text=True).stdout.split()


# --- a PyTorch-shaped repository: many files, many submodules ----------------------------

def _fast_import(path: Path, stream: bytes, bare: bool = False) -> None:
    subprocess.run(["git", "init", "-q", *(["--bare"] if bare else []), "-b", "main", str(path)],
                   check=True)
    subprocess.run(["git", "fast-import", "--quiet"], cwd=path, input=stream, check=True)


def _filler(seed: str, size: int) -> str:
    """`size` bytes of text that does not compress (hex of chained sha256)."""
    import hashlib
    out, block = [], seed.encode()
    while sum(map(len, out)) < size:
        block = hashlib.sha256(block).hexdigest().encode()
        out.append(block.decode())
    return "".join(out)[:size]


def make_submodule_repo(path: Path, commits: int, files: int, name: str,
                        file_bytes: int = 0) -> list[str]:
    """A bare repository with `commits` first-parent commits of `files` files (of about
    `file_bytes` each); commit k adds `only-at-{k}.txt` (gone at k+1), so a stale file in
    a submodule shows."""
    out = bytearray()
    for k in range(commits):
        ts = 1_600_000_000 + k * 3600
        out += b"commit refs/heads/main\nmark :%d\n" % (k + 1)
        out += b"committer Sub <sub@example.com> %d +0000\n" % ts
        out += _data(f"{name}: step {k}")
        if k:
            out += b"from :%d\nD only-at-%d.txt\n" % (k, k - 1)
        else:
            for f in range(files):
                out += f"M 644 inline src/part{f % 7}/file{f}.h\n".encode() + \
                    _data(f"// {name} file {f}\n" + _filler(f"{name}{f}", file_bytes))
        out += f"M 644 inline only-at-{k}.txt\n".encode() + _data(f"{name} {k}\n")
        out += b"M 644 inline VERSION\n" + _data(f"{name} {k}\n")
    _fast_import(path, bytes(out), bare=True)
    return subprocess.run(["git", "rev-list", "--first-parent", "--reverse", "main"], cwd=path,
                          check=True, capture_output=True, text=True).stdout.split()


def make_pytorch_shaped_repo(path: Path, *, commits: int = 2000, files: int = 20_000,
                             submodules: int = 30, sub_commits: int = 40, sub_files: int = 60,
                             sub_bytes: int = 0,
                             transition: int | None = None, move_every: int = 25,
                             missing: tuple[int, ...] = ()) -> dict:
    """A repository shaped like PyTorch's: `files` files in a deep tree, `submodules`
    submodules under third_party/ (local bare repositories next to it, each with its own
    history), a first-parent history of `commits` commits that moves a submodule pointer
    every `move_every` commits, and at the commits in `missing` a pointer to a commit the
    submodule does not have (as an upstream force-push leaves). `behaviour` is new from
    `transition` on (default: two thirds in). Returns {"shas", "subs": {path: bare repo},
    "sub_shas": {path: [shas]}, "missing": {index: path}}."""
    path = Path(path)
    transition = commits * 2 // 3 if transition is None else transition
    remotes = path.parent / f"{path.name}-remotes"
    subs, sub_shas = {}, {}
    for s in range(submodules):
        name = f"lib{s:02d}"
        subs[f"third_party/{name}"] = remotes / f"{name}.git"
        sub_shas[f"third_party/{name}"] = make_submodule_repo(remotes / f"{name}.git",
                                                              sub_commits, sub_files, name,
                                                              sub_bytes)
    pointer = {p: 0 for p in subs}
    gitmodules = "".join(f'[submodule "{p}"]\n\tpath = {p}\n\turl = {u}\n'
                         for p, u in subs.items())
    top = ("torch", "aten/src/ATen", "c10", "caffe2", "tools", "test", "benchmarks", "functorch")
    out = bytearray()
    missing_at: dict[int, str] = {}
    order = list(subs)
    for i in range(commits):
        ts = 1_700_000_000 + i * 60
        out += b"commit refs/heads/main\nmark :%d\n" % (i + 1)
        out += b"committer Dev <dev@example.com> %d +0000\n" % ts
        out += _data(f"change {i}" + (f" (#{5000 + i})" if i % 3 == 0 else ""))
        if i:
            out += b"from :%d\n" % i
        else:
            out += b"M 644 inline .gitmodules\n" + _data(gitmodules)
            for f in range(files):
                d = f"{top[f % len(top)]}/d{f % 97}/e{f % 13}"
                out += f"M 644 inline {d}/f{f}.py\n".encode() + _data(f"# file {f}\n")
            for p in subs:
                out += f"M 160000 {sub_shas[p][0]} {p}\n".encode()
        out += b"M 644 inline behaviour\n" + _data("new\n" if i >= transition else "old\n")
        out += f"M 644 inline torch/d{i % 97}/touched.py\n".encode() + _data(f"# {i}\n")
        if i and i % move_every == 0:
            p = order[(i // move_every) % len(order)]
            pointer[p] = min(pointer[p] + 1, sub_commits - 1)
            out += f"M 160000 {sub_shas[p][pointer[p]]} {p}\n".encode()
        if i in missing:
            p = order[i % len(order)]
            missing_at[i] = p
            out += f"M 160000 {'e' * 40} {p}\n".encode()
        elif i - 1 in missing:           # the next commit points back at a real one
            p = missing_at[i - 1]
            out += f"M 160000 {sub_shas[p][pointer[p]]} {p}\n".encode()
    _fast_import(path, bytes(out))
    subprocess.run(["git", "reset", "-q", "--hard", "main"], cwd=path, check=True)
    shas = subprocess.run(["git", "rev-list", "--first-parent", "--reverse", "main"], cwd=path,
                          check=True, capture_output=True, text=True).stdout.split()
    return {"shas": shas, "subs": subs, "sub_shas": sub_shas, "missing": missing_at}


def catalog(tmp_path: Path, rows: list[tuple[str, str]]) -> Path:
    """A release catalog (BISECT_NGC_CATALOG) whose releases ship these commits."""
    path = tmp_path / "catalog.tsv"
    path.write_text("release\ttorch_version\ttorch_commit\ttorch_verified\tcuda\tcuda_verified\t"
                    "transformer_engine\tte_verified\tpython\tubuntu\n" +
                    "".join(f"{r}\t2.9.0a0+{c[:10]}\t{c}\tV1\t12.9\tU\t2.0\tU\t\t24.04\n"
                            for r, c in rows))
    return path


# The test also appends the commit to a counter file, so executions can be counted.
COUNTING_TEST = 'echo "$BISECT_COMMIT" >> "$COUNTER"; ' + TEST


def bisect_args(repo, state, *extra, test=COUNTING_TEST, build=BUILD):
    return ["bisect", "--repo", str(repo), "--old", "main~%d" % extra_len(repo), "--new", "main",
            "--build", build, "--test", test, "--state", str(state), "--quiet", *extra]


def extra_len(repo) -> int:
    out = subprocess.run(["git", "rev-list", "--first-parent", "--count", "main"], cwd=repo,
                         capture_output=True, text=True, check=True).stdout
    return int(out) - 1
