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
from typing import Any, Callable, Protocol

from .attribution import Attribution, Side, Swap, next_swaps
from .component_scripts import EXTRACT_SCRIPT, INVENTORY_SCRIPT
from .errors import UserError
from .swap_log import SwapLog

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
    key = hashlib.sha256(json.dumps([into, sorted(c.unit for c in components)]).encode())
    directory = root / key.hexdigest()[:16]
    env: dict[str, str] = {}
    unset: list[str] = []
    for c in components:
        why = cannot_swap(c, into, target_python, donor_python)
        if why:
            return SwapLayout(directory, {}, (), why)
        if c.kind == "env":
            name = c.unit.split(":", 1)[1]
            if donor(c) is None:
                unset.append(name)
            else:
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
    return SwapLayout(directory, env, tuple(unset), imports=top_level_modules(directory / "site"))


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


class Containers(Protocol):
    """What attribution needs from a container engine."""

    def digest(self, image: str) -> str: ...
    def config_env(self, image: str) -> list[str]: ...
    def python_json(self, image: str, script: str, args: list[str],
                    mounts: list[tuple[Path, str, bool]]) -> str: ...
    def run(self, image: str, command: str, env: dict[str, str],
            mounts: list[tuple[Path, str, bool]]) -> int | None: ...
    def output(self, image: str, command: str, env: dict[str, str],
               mounts: list[tuple[Path, str, bool]]) -> tuple[int | None, str]: ...


class ScriptsByShell:
    """python_json and run for an engine whose one primitive is output(): a command
    through the image's /bin/sh (Docker's containers, Slurm's jobs)."""

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


class Attributor:
    """Image A against image B: inventory, diff, then ddmin over swap probes. Every
    outcome is written to the swap log as it comes, so the same command resumes."""

    def __init__(self, a: str, b: str, test: str, work: Path, engine: Containers,
                 say: Callable[[str], None]):
        self.images = {"a": a, "b": b}
        self.test, self.work, self.engine, self.say = test, work, engine, say
        self.digests = {side: engine.digest(image) for side, image in self.images.items()}
        key = hashlib.sha256(json.dumps([self.digests, test]).encode()).hexdigest()[:12]
        self.log = SwapLog(work / "swaps.sqlite", key, legacy=work / "sessions" / f"{key}.json")

    def inventory(self, side: str) -> dict[str, Any]:
        path = self.work / "inventory" / f"{safe(self.digests[side])}.json"
        if not path.exists():
            self.say(f"inventory of {self.images[side]}")
            found = json.loads(self.engine.python_json(self.images[side], INVENTORY_SCRIPT, [],
                                                       []))
            _write(path, found)
        inv = json.loads(path.read_text())
        inv["env"] = env_of(self.engine.config_env(self.images[side]))
        return inv

    def extract(self, side: str, inv: dict[str, Any], units: list[str]) -> Path:
        dest = self.work / "extract" / safe(self.digests[side])
        done = dest / ".done.json"
        if done.exists() and set(json.loads(done.read_text())) >= set(units):
            return dest
        plan = extraction_plan(inv, units)
        dest.mkdir(parents=True, exist_ok=True)
        self.say(f"extracting {len(plan)} component(s) of {self.images[side]}")
        self.engine.python_json(self.images[side], EXTRACT_SCRIPT, [json.dumps(plan)],
                                [(dest, "/extract", False)])
        _write(done, sorted(units))
        return dest

    def swap_only(self, units: list[str]) -> Side | None:
        """One swap of A with B's `units`, or None where they do not differ, cannot be
        swapped, or the images as they are give no two behaviours to tell apart."""
        inv = {side: self.inventory(side) for side in ("a", "b")}
        comps = {c.unit: c for c in diff(inv["a"], inv["b"])}
        chosen = [comps[u] for u in units if u in comps]
        pythons = (inv["a"]["python"], inv["b"]["python"])
        if not chosen or any(cannot_swap(c, "a", *pythons) for c in chosen):
            return None
        plain = self._plain()
        if "skip" in plain.values() or plain["a"] == plain["b"]:
            return None
        swap = Swap.of("a", [c.unit for c in chosen])
        stored = self.log.outcomes().get(_key_of(swap))
        if stored is not None:
            return Side(stored[0])
        extracted = {side: self.extract(side, inv[side], [c.unit for c in chosen])
                     for side in ("a", "b")}
        side, why = self._swap(swap, chosen, inv, extracted, plain)
        self.log.put(_key_of(swap), side.value, why)
        return side

    def _plain(self) -> dict[str, str]:
        """Both images' own verdicts, each run once."""
        stored = {k: outcome for k, (outcome, _) in self.log.outcomes().items()}
        for side in ("a", "b"):
            if f"plain:{side}" not in stored:
                stored[f"plain:{side}"] = verdict_of(self.engine.run(self.images[side],
                                                                     self.test, {}, []))
                self.log.put(f"plain:{side}", stored[f"plain:{side}"])
        return {side: stored[f"plain:{side}"] for side in ("a", "b")}

    def run(self, only: tuple[str, ...] = ()) -> dict[str, Any]:
        """Attribution over the differing components (or those of them in `only`)."""
        inv = {side: self.inventory(side) for side in ("a", "b")}
        comps = diff(inv["a"], inv["b"])
        unknown = sorted(set(only) - {c.unit for c in comps})
        if unknown:
            raise UserError(f"no component {unknown[0]} differs between {self.images['a']} "
                            f"and {self.images['b']}",
                            hint="the differing ones: " + ", ".join(c.unit for c in comps)[:600])
        comps = [c for c in comps if not only or c.unit in only]
        by_unit = {c.unit: c for c in comps}
        plain = self._plain()
        out: dict[str, Any] = {"images": self.images, "digests": self.digests,
                               "outcomes": plain, "components": [c.__dict__ for c in comps],
                               "unswappable": {}, "swaps": []}
        if "skip" in plain.values() or plain["a"] == plain["b"]:
            out["attribution"] = Attribution(
                "invalid-endpoints", explanation=f"A {plain['a']}s and B {plain['b']}s as they "
                                                 f"are: nothing to attribute")
            return out
        pythons = (inv["a"]["python"], inv["b"]["python"])
        out["unswappable"] = {c.unit: why for c in comps
                              if (why := cannot_swap(c, "a", *pythons))}
        units = [u for u in by_unit if u not in out["unswappable"]]
        extracted = {side: self.extract(side, inv[side], units) for side in ("a", "b")}
        stored = {_swap_of(k): v for k, v in self.log.outcomes().items()
                  if not k.startswith("plain:")}
        # Swaps of other components (an earlier question with --only) are not this search's.
        seen = {s: Side(side) for s, (side, _) in stored.items() if s.components <= set(units)}
        whys = {s: why for s, (_, why) in stored.items()}
        while isinstance(step := next_swaps(units, seen), list):
            for swap in step:
                side, whys[swap] = self._swap(swap, [by_unit[u] for u in sorted(swap.components)],
                                              inv, extracted, plain)
                seen[swap] = side
                self.log.put(_key_of(swap), side.value, whys[swap])
        out["attribution"] = step
        out["swaps"] = [{"into": s.into, "components": sorted(s.components), "side": v.value,
                         "why": whys.get(s, "")} for s, v in seen.items()]
        return out

    def _swap(self, swap: Swap, comps: list[Component], inv: dict[str, Any],
              extracted: dict[str, Path], plain: dict[str, str]) -> tuple[Side, str]:
        """Whose behaviour the swap showed, and why it could not run where it is a skip
        the swap itself caused ("" otherwise)."""
        target, donor = (swap.into, "b" if swap.into == "a" else "a")
        lay = layout(comps, swap.into, extracted[donor], self.work / "swaps",
                     inv[target]["python"], inv[donor]["python"])
        label = f"{self.images[target]} with {len(comps)} of {self.images[donor]}'s components"
        if lay.why_not:
            self.say(f"  {label}: skip ({lay.why_not})")
            return Side.SKIP, lay.why_not
        own = inv[target]["env"]
        env = dict(lay.env)
        env["PYTHONPATH"] = ":".join(filter(None, [str(lay.directory / "site"),
                                                   own.get("PYTHONPATH")]))
        env["LD_LIBRARY_PATH"] = ":".join(filter(None, [str(lay.directory / "lib"),
                                                        own.get("LD_LIBRARY_PATH")]))
        mounts = [(extracted[donor], str(extracted[donor]), True),
                  (lay.directory, str(lay.directory), True)]
        if lay.imports:
            code, out = self.engine.output(self.images[target], lay.import_check(), env, mounts)
            if code != 0:
                why = (out.strip().splitlines() or [f"exit {code}"])[-1]
                self.say(f"  {label}: skip (does not load: {why})")
                return Side.SKIP, f"does not load: {why}"
        verdict = verdict_of(self.engine.run(self.images[target], lay.command(self.test), env,
                                             mounts))
        side = Side.B if verdict == plain["b"] else Side.A if verdict == plain["a"] else Side.SKIP
        self.say(f"  {label} ({', '.join(c.unit for c in comps)}): {verdict}, like "
                 f"{side.value.upper() if side is not Side.SKIP else 'neither'}")
        return side, ""


def _key_of(swap: Swap) -> str:
    return json.dumps([swap.into, sorted(swap.components)])


def _swap_of(key: str) -> Swap:
    into, units = json.loads(key)
    return Swap.of(into, units)


def _write(path: Path, value: Any) -> None:
    """Written whole or not at all: a killed run never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=1))
    tmp.replace(path)


class ImageSwaps:
    """Swap probes between two release images, for the bisection: does PyTorch carry
    the difference (one swap, no build), and if not, which component does."""

    def __init__(self, engine: Containers, work: Path, test: str, say: Callable[[str], None],
                 unit: str = "py:torch"):
        self.engine, self.work, self.test, self.say = engine, work, test, say
        self.unit = unit          # the distribution whose commits are bisected

    def _of(self, a: str, b: str) -> Attributor:
        return Attributor(a, b, self.test, self.work, self.engine, self.say)

    def carries(self, a: str, b: str) -> bool | None:
        """Whether A with B's files of the bisected distribution behaves like B."""
        side = self._of(a, b).swap_only([self.unit])
        return None if side is None or side is Side.SKIP else side is Side.B

    def attribute(self, a: str, b: str) -> dict[str, Any]:
        found = self._of(a, b).run()
        answer = found.pop("attribution")
        return dict(found, status=answer.status, culprits=list(answer.culprits),
                    explanation=answer.explanation)
