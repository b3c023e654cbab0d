"""The installed package, as a Slurm node or a fresh machine gets it: the wheel built from
this checkout holds every module, its templates and data, and each module imports from the
wheel alone (no source tree on the path)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ("bisect_ngc/data/ngc-pytorch-releases.tsv", "bisect_ngc/templates/report.md.j2",
        "bisect_ngc/templates/slurm-test.sh.j2", "bisect_ngc/dockerfiles/pytorch-build.sh.j2",
        "repro/__main__.py")


@pytest.mark.slow
def test_the_wheel_holds_and_imports_every_module(tmp_path):
    src = tmp_path / "src"          # a copy: setuptools' build/ must not carry old modules
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".*", "build", "*.egg-info", "__pycache__", "tests", "benchmarks", "docs"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(tmp_path / "dist"), str(src)],
                   check=True, capture_output=True, cwd=tmp_path)
    wheel = zipfile.ZipFile(next((tmp_path / "dist").glob("bisect_ngc-*.whl")))
    names = set(wheel.namelist())
    assert set(DATA) <= names, set(DATA) - names
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "bisect_ngc").rglob("*.py")}
    assert sources <= names, sorted(sources - names)
    modules = sorted(n[:-3].replace("/", ".").removesuffix(".__init__") for n in names
                     if n.startswith("bisect_ngc/") and n.endswith(".py")
                     and not n.endswith("__main__.py"))
    site = tmp_path / "site"
    wheel.extractall(site)
    code = ("import importlib, json, sys; "
            "print(json.dumps({m: importlib.import_module(m).__file__ for m in sys.argv[1:]}))")
    out = subprocess.run([sys.executable, "-c", code, *modules], capture_output=True,
                         text=True, cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    files = json.loads(out.stdout)
    assert len(files) == len(modules) > 60
    assert all(Path(f).is_relative_to(site) for f in files.values()), files
