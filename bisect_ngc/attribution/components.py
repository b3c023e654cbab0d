"""What an image is made of, what differs between two images, and swap probes.

An image's inventory, read once per image digest by running a small script in it:
- Python distributions (name, version, their files from RECORD or installed-files, and a
  digest of that record), first on sys.path first, as import finds them; NGC's
  `/usr/local/lib/python3.X/dist-packages` and `/usr/lib/python3/dist-packages` included;
- shared libraries in NGC's library directories (`/usr/local/cuda*/lib64`,
  `/usr/lib/x86_64-linux-gnu`, `/usr/local/lib`), grouped by name (libnccl, libcudnn...)
  with the file they resolve to and its size;
- the image's environment variables (from its configuration).

Each unit that differs is a component: `py:NAME`, `lib:NAME` or `env:NAME`. A swap puts
a set of one image's components into a container of the other: the files are extracted
once per image digest into the cache, linked into a directory per swap and put ahead of
the image's own on PYTHONPATH and LD_LIBRARY_PATH; the variables are set (or unset).
"""
from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import UserError
from ..core.search import RepeatPolicy, Verdict, combine_runs, runs_settled

# The search variables a swap composes: its own directory first, then the variable as the
# image that gives it (the donor, where the variable is swapped) has it.
_PATHS = {"site": "PYTHONPATH", "lib": "LD_LIBRARY_PATH"}

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SKIP_ENV = {"HOSTNAME", "HOME", "PATH", "PWD", "SHLVL", "TERM", "_"}


@dataclass(frozen=True)
class Component:
    unit: str                 # py:NAME | lib:NAME | env:NAME
    in_a: str | None          # its version (or value) in image A; None: absent
    in_b: str | None

    @property
    def kind(self) -> str:
        return self.unit.split(":", 1)[0]


def dist_unit(name: str) -> str:
    """A Python distribution's unit, named as the inventory keys it (PEP 503)."""
    return "py:" + re.sub(r"[-_.]+", "-", name).lower()


def env_of(config_env: list[str] | None) -> dict[str, str]:
    pairs = (item.split("=", 1) for item in config_env or [] if "=" in item)
    return {k: v for k, v in pairs if k not in _SKIP_ENV}


def diff(a: dict[str, Any], b: dict[str, Any]) -> list[Component]:
    """The components that differ between two inventories, sorted by unit."""
    found: list[Component] = []

    def version(entry: dict[str, Any] | None, kind: str) -> str | None:
        if entry is None:
            return None
        return entry["version"] if kind == "dists" else entry["real"] or "?"

    for kind, prefix in (("dists", "py"), ("libs", "lib")):
        for key in sorted(set(a[kind]) | set(b[kind])):
            ea, eb = a[kind].get(key), b[kind].get(key)
            same = ea is not None and eb is not None and (
                ea["digest"] == eb["digest"] if kind == "dists"
                else (ea["real"], ea["size"]) == (eb["real"], eb["size"]))
            if not same:
                found.append(Component(f"{prefix}:{key}", version(ea, kind), version(eb, kind)))
    for key in sorted(set(a["env"]) | set(b["env"])):
        if a["env"].get(key) != b["env"].get(key) and _ENV_NAME.match(key):
            found.append(Component(f"env:{key}", a["env"].get(key), b["env"].get(key)))
    return found


def extraction_plan(inventory: dict[str, Any], units: list[str]) -> dict[str, tuple[str, list]]:
    """unit -> (base directory, files below it) for the py and lib units an image has."""
    plan: dict[str, tuple[str, list]] = {}
    for unit in units:
        kind, _, key = unit.partition(":")
        if kind == "py" and key in inventory["dists"]:
            d = inventory["dists"][key]
            plan[safe(unit)] = (d["base"], d["files"])
        elif kind == "lib" and key in inventory["libs"]:
            lib = inventory["libs"][key]
            names = sorted(set(lib["files"]) | ({lib["real"]} if lib["real"] else set()))
            plan[safe(unit)] = (lib["dir"], names)
    return plan


def safe(unit: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", unit) + "-" + hashlib.sha256(unit.encode()).hexdigest()[:8]


@dataclass(frozen=True)
class SwapLayout:
    """How a container runs with a set of the other image's components in place."""

    directory: Path           # per swap: site/ and lib/ of links into the extraction
    env: dict[str, str]
    unset: tuple[str, ...]
    why_not: str = ""         # non-empty: this swap cannot be made (a skip)
    imports: tuple[str, ...] = ()   # the swapped distributions' top-level modules
    swapped: frozenset[str] = frozenset()   # PYTHONPATH / LD_LIBRARY_PATH taken from the donor

    def search_paths(self, own: dict[str, str]) -> dict[str, str]:
        """PYTHONPATH and LD_LIBRARY_PATH: the swap's directories ahead of the value the
        test must see (the donor's where that variable is swapped, else the image's own)."""
        paths = {}
        for sub, name in _PATHS.items():
            value = self.env.get(name) if name in self.swapped else own.get(name)
            paths[name] = ":".join(filter(None, [str(self.directory / sub), value]))
        return paths

    def import_check(self) -> str:
        """A command that imports every swapped module, printing the error of one that
        does not load (built for another Python, another ABI): such a swap is a skip."""
        names = ", ".join(self.imports)
        return f"python3 -c {shlex.quote(f'import {names}')} 2>&1"

    def command(self, test: str) -> str:
        """The test, with the variables the other image lacks removed first."""
        prefix = "".join(f"unset {shlex.quote(name)}; " for name in self.unset)
        return prefix + test


def cannot_swap(c: Component, into: str, target_python: str, donor_python: str) -> str:
    """Why `c` cannot be put into image `into`, or ""."""
    donor = c.in_b if into == "a" else c.in_a
    if c.kind != "env" and donor is None:
        return (f"{c.unit} is not in the other image, and a swap can only put files in, not "
                f"take them out")
    if c.kind == "py" and target_python != donor_python:
        return f"{c.unit} is built for Python {donor_python}; this image runs {target_python}"
    return ""


def layout(components: list[Component], into: str, extracted: Path, root: Path,
           target_python: str, donor_python: str) -> SwapLayout:
    """The swap of `components` into image `into` ("a": B's versions go into A)."""
    donor = (lambda c: c.in_b) if into == "a" else (lambda c: c.in_a)
    # per donor extraction too: a directory's links point into one image's files
    key = hashlib.sha256(json.dumps([into, sorted(c.unit for c in components),
                                     str(extracted)]).encode())
    directory = root / key.hexdigest()[:16]
    env: dict[str, str] = {}
    unset: list[str] = []
    for c in components:
        why = cannot_swap(c, into, target_python, donor_python)
        if why:
            return SwapLayout(directory, {}, (), why)
        if c.kind == "env":
            name = c.unit.split(":", 1)[1]
            if donor(c) is None and name not in _PATHS.values():
                unset.append(name)
            elif donor(c) is not None:
                env[name] = donor(c)
    for sub, kind in (("site", "py"), ("lib", "lib")):
        for c in components:
            if c.kind != kind:
                continue
            source = extracted / safe(c.unit)
            for path in sorted(p for p in source.rglob("*") if not p.is_dir()):
                link = directory / sub / path.relative_to(source)
                link.parent.mkdir(parents=True, exist_ok=True)
                if not link.is_symlink():
                    link.symlink_to(path)
    (directory / "site").mkdir(parents=True, exist_ok=True)
    (directory / "lib").mkdir(parents=True, exist_ok=True)
    swapped = {c.unit.split(":", 1)[1] for c in components if c.kind == "env"}
    return SwapLayout(directory, env, tuple(unset), imports=top_level_modules(directory / "site"),
                      swapped=frozenset(swapped & set(_PATHS.values())))


def top_level_modules(site: Path) -> tuple[str, ...]:
    """The importable top-level names in a directory put on PYTHONPATH: packages, modules
    and extension modules (`_ext.cpython-312-x86_64-linux-gnu.so` is `_ext`)."""
    names = set()
    for entry in site.iterdir():
        if entry.is_dir() and (entry / "__init__.py").exists():
            names.add(entry.name)
        elif entry.suffix in (".py", ".so") and not entry.is_dir():
            names.add(entry.name.split(".")[0])
    return tuple(sorted(n for n in names if n.isidentifier()))


class ScriptsByShell:
    """python_json and run for an engine whose one primitive is output(): a command
    through the image's /bin/sh (Docker's containers, Slurm's jobs)."""

    work_dir: Path | None = None

    def output(self, image: str, command: str, env: dict[str, str],
               mounts: list[tuple[Path, str, bool]]) -> tuple[int | None, str]:
        raise NotImplementedError

    def python_json(self, image: str, script: str, args: list[str],
                    mounts: list[tuple[Path, str, bool]]) -> str:
        code, out = self.output(image, shlex.join(["python3", "-c", script, *args]), {}, mounts)
        if code != 0:
            why = "no python3 in it" if code == 127 else f"python3 exited {code}" \
                if code is not None else "it did not run"
            raise UserError(f"could not read the components of {image} ({why})",
                            hint="the image needs python3; is it a PyTorch image?")
        return out.strip().splitlines()[-1] if out.strip() else "{}"

    def run(self, image: str, command: str, env: dict[str, str],
            mounts: list[tuple[Path, str, bool]]) -> int | None:
        return self.output(image, command, env, mounts)[0]


def verdict_of(code: int | None) -> str:
    return "skip" if code is None or code == 125 or code < 0 or code > 127 else \
        "pass" if code == 0 else "fail"


@dataclass(frozen=True)
class Evidence:
    """How much a swap's verdict rests on: test runs per swap under the repeat policy (as
    a probe's), and the fresh runs that confirm an answer (attribution.next_swaps)."""

    repeat: int = 1
    policy: RepeatPolicy = RepeatPolicy.ANY
    verify: int = 3

    def judge(self, run: Callable[[int], int | None]) -> str:
        """A verdict from up to `repeat` runs of `run(number)`, stopping once settled."""
        runs: list[Verdict] = []
        for number in range(1, self.repeat + 1):
            runs.append(Verdict(verdict_of(run(number))))
            if runs_settled(runs, self.repeat, self.policy):
                break
        return combine_runs(runs, self.policy).value
