"""The package's shape, read from its imports: no import cycles, a floor plan of packages
that import only what the table allows, pure leaves, backends that know only their shared
interface, and a report that needs no repository."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "bisect_ngc"


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, top_level_only: bool) -> set[str]:
    """Modules of this package (and others, by top name) that `path` imports."""
    tree = ast.parse(path.read_text())
    me = module_name(path).split(".")
    package = me if path.name == "__init__.py" else me[:-1]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            found.add(mod)
            if not node.module:      # from . import x
                found |= {f"{mod}.{a.name}" for a in node.names}
    return found


MODULES = {module_name(p): p for p in PKG.rglob("*.py")}


def graph(top_level_only: bool = True) -> dict[str, set[str]]:
    return {name: {m for m in imports(path, top_level_only) if m in MODULES and m != name}
            for name, path in MODULES.items()}


def test_no_import_cycles():
    """Counting every import: inside functions and under TYPE_CHECKING too, where a
    circle is merely hidden from the interpreter, not from the reader."""
    edges = graph(top_level_only=False)
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in edges[node]:
            assert state.get(nxt) != 1, "import cycle: " + " -> ".join(trail + [nxt])
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])


# The floor plan: what each package may import. Every package may also import the face
# (bisect_ngc, errors) and the pure leaves, which import nothing of ours but errors.
PACKAGES = ("vcs", "core", "companions", "images", "prebuilt", "attribution", "metric",
            "report", "backends", "question", "cli")
ALLOWED = {
    "vcs": set(),
    "core": {"vcs"},
    "companions": {"core", "vcs"},
    "images": {"core", "vcs"},
    "prebuilt": {"core", "vcs", "images"},
    "attribution": {"core", "images"},
    "metric": {"core"},
    "report": {"core"},
    "backends": {"core", "vcs", "companions", "images", "prebuilt", "attribution"},
    "question": set(PACKAGES) - {"question", "cli"},
    "cli": set(PACKAGES) - {"cli"},
}
PURE = {"bisect_ngc.core.search", "bisect_ngc.prebuilt.overlay", "bisect_ngc.attribution.search",
        "bisect_ngc.companions.specs", "bisect_ngc.metric.sequential", "bisect_ngc.vcs.changes",
        "bisect_ngc.images.image_config", "bisect_ngc.core.belief"}
FACE = {"bisect_ngc", "bisect_ngc.__main__", "bisect_ngc.errors"}
IO = {"git", "docker", "subprocess", "os", "sqlite3", "click", "zipfile"}


def package(module: str) -> str:
    return module.split(".")[1]


def test_the_top_level_is_the_face_and_packages():
    assert {n for n in MODULES if n.count(".") < 2} == FACE | {f"bisect_ngc.{p}" for p in PACKAGES}


def test_packages_import_only_what_the_floor_plan_allows():
    """Counting every import, TYPE_CHECKING's too."""
    wrong = [f"{a} -> {b}" for a, deps in graph(top_level_only=False).items() if a not in FACE
             for b in deps if b not in FACE | PURE and package(b) != package(a)
             and package(b) not in ALLOWED[package(a)]]
    assert not wrong, wrong


def test_each_package_says_what_it_holds():
    for name in PACKAGES:
        doc = ast.get_docstring(ast.parse(MODULES[f"bisect_ngc.{name}"].read_text()))
        assert doc and len(doc) > 80, f"bisect_ngc/{name}/__init__.py needs its docstring"


def test_pure_modules_are_leaves():
    for name in PURE:
        used = imports(MODULES[name], top_level_only=False)
        assert {m for m in used if m.startswith("bisect_ngc")} <= {"bisect_ngc.errors"} | PURE, name
        assert not used & IO, name


def test_backends_know_only_their_interface():
    everything = graph(top_level_only=False)
    backends = {n for n in MODULES if n.startswith("bisect_ngc.backends.")} - \
        {"bisect_ngc.backends.base"}

    def family(module: str) -> str:       # backends.slurm.queue is part of backends.slurm
        return module.split(".")[2]
    for name in backends:
        siblings = {b for b in backends if family(b) != family(name)}
        assert not everything[name] & siblings, f"{name} imports a sibling backend"


def test_the_report_opens_no_repository():
    used = imports(MODULES["bisect_ngc.report.markdown"], top_level_only=False)
    assert not used & {"git", "bisect_ngc.vcs.history", "bisect_ngc.images.releases",
                        "subprocess"}


def test_only_question_and_the_registry_name_concrete_backends():
    everything = graph(top_level_only=False)
    concrete = {n for n in MODULES if n.startswith("bisect_ngc.backends.")} - \
        {"bisect_ngc.backends", "bisect_ngc.backends.base"}
    users = {n for n, deps in everything.items() if deps & concrete} - concrete
    assert users <= {"bisect_ngc.backends", "bisect_ngc.cli.catalog",
                     "bisect_ngc.cli.components"}, users


def test_the_license_is_an_spdx_string():
    """A TOML table for project.license is deprecated (pip warns at every install)."""
    import tomllib
    meta = tomllib.loads((PKG.parent / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "Apache-2.0"
    assert any(r.startswith("setuptools>=77") for r in meta["build-system"]["requires"])


def test_files_and_functions_stay_readable():
    """A file a newcomer reads in one sitting, a function on one screen."""
    for name, path in MODULES.items():
        src = path.read_text()
        assert src.count(chr(10)) <= 400, f"{name}: {src.count(chr(10))} lines"
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                assert length <= 50, f"{name}.{node.name}: {length} lines"


def test_the_readme_table_of_packages_is_the_floor_plan():
    import re
    rows = [line.split("|")[1:-1] for line in (PKG.parent / "README.md").read_text().splitlines()
            if re.match(r"\| `\w+/` \|", line)]
    table = {}
    for name, _, allowed in rows:
        pkg = name.strip(" `/")
        cell = set(re.findall(r"`(\w+)`", allowed))
        table[pkg] = set(PACKAGES) - {pkg} - cell if "everything" in allowed else cell
    assert table == {p: ALLOWED[p] - {p} for p in PACKAGES}


def test_tests_share_helpers_through_tests_lib_alone():
    """A test imports no benchmark and no other test module: what several share lives in
    tests/lib/ (benchmarks may import tests/lib too)."""
    tests = PKG.parent / "tests"
    wrong = []
    for path in tests.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                name = ("." * node.level) + (node.module or "")
                if name.startswith(("benchmarks", ".test_", "tests.test_")) or \
                        ".test_" in name or (node.level and not node.module):
                    wrong.append(f"{path.relative_to(tests)}: from {name} import ...")
            elif isinstance(node, ast.Import):
                wrong += [f"{path.relative_to(tests)}: import {a.name}" for a in node.names
                          if a.name.startswith("benchmarks")]
    assert not wrong, wrong


def test_the_tests_mirror_the_packages():
    """`ls tests/` answers "where are the tests for X?": a folder per package, each test
    file inside named for a module of it, a suite, or what it checks across modules."""
    tests = PKG.parent / "tests"
    assert {p for p in PACKAGES} <= {d.name for d in tests.iterdir() if d.is_dir()}
    loose = {p.name for p in tests.glob("test_*.py")}
    assert loose <= {"test_layers.py", "test_types.py", "test_readme.py",
                     "test_docs_commands.py", "test_references.py", "test_wheel.py",
                     "test_accuracy.py"}, loose
