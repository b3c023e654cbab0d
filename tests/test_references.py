"""Every module a page or a docstring names exists: `core/search.py`, `search.py` beside its
package's modules, `bisect_ngc.metric.comparator`, `tests/lib/repos.py`. A move that
leaves a stale name behind fails here."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "BENCHMARKS.md",
         ROOT / "repro" / "README.md"]
SOURCES = sorted(p for top in ("bisect_ngc", "tests", "benchmarks", "repro", "scripts")
                 for p in (ROOT / top).rglob("*.py"))
PATH = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.py)\b")
DOTTED = re.compile(r"\bbisect_ngc(?:\.\w+)+")
FILES = {p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.py")
         if ".venv" not in p.parts and "build" not in p.parts}
NAMES = {Path(f).name for f in FILES}
# Files of the projects that are bisected (and that the tests generate), not of this one.
FOREIGN = {"setup.py", "version.py", "torch/version.py", "config.py", "logic.py", "t.py"}
# Packages that pyproject.toml maps from elsewhere (package-dir).
MAPPED = {"bisect_ngc.dockerfiles"}


def _exists(name: str, here: Path) -> bool:
    """A path from the root, the package, or the file's own folder; a bare name
    anywhere in the repository."""
    if name in FOREIGN:
        return True
    if "/" not in name:
        return name in NAMES
    tries = [name, f"bisect_ngc/{name}", (here.parent / name).relative_to(ROOT).as_posix()
             if here.parent.is_relative_to(ROOT) else name]
    return any(t in FILES or (ROOT / t).exists() for t in tries)


def _module(dotted: str) -> bool:
    if dotted in MAPPED:
        return True
    parts = dotted.split(".")
    for n in range(len(parts), 1, -1):      # a module, then perhaps an attribute of it
        base = ROOT.joinpath(*parts[:n])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return True
    return False


def _texts() -> list[tuple[Path, str]]:
    found = [(p, p.read_text()) for p in PAGES if p.exists()]
    for path in SOURCES:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef,
                                 ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    found.append((path, doc))
    return found


def test_every_module_named_in_pages_and_docstrings_exists():
    stale = sorted({f"{path.relative_to(ROOT)}: {name}" for path, text in _texts()
                    for name in PATH.findall(text) if not _exists(name, path)} |
                   {f"{path.relative_to(ROOT)}: {name}" for path, text in _texts()
                    for name in DOTTED.findall(text) if not _module(name)})
    assert not stale, stale
