"""When a commit can be probed by patching a neighbour's wheel instead of building it.

Pure logic: a diff (a list of Change) and a rule in, a Decision out; and the choice of
the built commit to patch. Which files ship as they are is data (an OverlayRule), with a
preset for PyTorch. A rule is a list of `kind:GLOB` lines, where `*` also matches `/`:

  ships:GLOB   files installed into the wheel byte for byte (PyTorch: torch/*.py; presets
               `pytorch` and `transformer_engine`)
  never:GLOB   files that look like they ship but are build inputs or outputs
  inert:GLOB   files that never reach the build (tests, docs); their changes are ignored

A change is overlay-safe only when every changed path is inert or ships (and is not
`never`), nothing is a submodule pointer, a symlink or a type change. Anything else
(C++, CMake, setup.py, YAML codegen inputs, ...) needs a real build.
"""
from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Callable, Iterable, Sequence

from ..vcs.changes import Change

KINDS = ("ships", "never", "inert")
OVERLAY_COST = 1 / 30      # a patched wheel against a build: a minute or two against an hour

PYTORCH_RULE = (
    "ships:torch/*.py",
    # Build inputs or outputs that live next to shipped Python.
    "never:torch/csrc/*", "never:torch/_C/*", "never:torch/version.py",
    "never:torchgen/*", "never:tools/*", "never:*.yaml", "never:*.pyi.in", "never:*.in",
    "never:setup.py", "never:pyproject.toml", "never:requirements*", "never:*CMakeLists.txt",
    "never:cmake/*", "never:third_party/*",
    "inert:test/*", "inert:docs/*", "inert:.github/*", "inert:*.md",
)
# Transformer Engine (`--component transformer_engine`): its Python ships as it is; the
# C++/CUDA library, the extensions and the build scripts do not.
TE_RULE = (
    "ships:transformer_engine/*.py",
    "never:transformer_engine/common/*", "never:transformer_engine/*/csrc/*",
    "never:*.cpp", "never:*.cu", "never:*.cuh", "never:*.h", "never:*CMakeLists.txt",
    "never:build_tools/*", "never:3rdparty/*", "never:setup.py", "never:pyproject.toml",
    "never:*/setup.py", "never:transformer_engine/VERSION*", "never:*/build_info.py",
    "inert:tests/*", "inert:docs/*", "inert:examples/*", "inert:.github/*", "inert:*.md",
)
PRESETS = {"pytorch": PYTORCH_RULE, "transformer_engine": TE_RULE}


@dataclass(frozen=True)
class Decision:
    safe: bool
    reason: str
    replace: tuple[str, ...] = ()   # paths whose C version goes into the wheel
    delete: tuple[str, ...] = ()    # paths to take out of the wheel

    @property
    def files(self) -> int:
        return len(self.replace) + len(self.delete)


class RuleError(ValueError):
    pass


@dataclass(frozen=True)
class OverlayRule:
    ships: tuple[str, ...]
    never: tuple[str, ...] = ()
    inert: tuple[str, ...] = ()

    @classmethod
    def parse(cls, lines: Iterable[str]) -> "OverlayRule":
        """From `kind:GLOB` lines; a line that names a preset (`pytorch`) adds its lines."""
        found: dict[str, list[str]] = {k: [] for k in KINDS}
        for line in lines:
            line = line.strip()
            if line in PRESETS:
                for kind, glob in (ln.split(":", 1) for ln in PRESETS[line]):
                    found[kind].append(glob)
                continue
            kind, sep, glob = line.partition(":")
            if not sep or kind not in KINDS or not glob:
                raise RuleError(f"overlay rule {line!r} is not KIND:GLOB with KIND one of "
                                f"{', '.join(KINDS)}, nor a preset ({', '.join(PRESETS)})")
            found[kind].append(glob)
        if not found["ships"]:
            raise RuleError("an overlay rule needs at least one ships:GLOB line")
        return cls(*(tuple(found[k]) for k in KINDS))

    def kind(self, path: str) -> str:
        """'inert', 'ships' or 'build' (anything whose change needs a build)."""
        if _matches(path, self.never):
            return "build"
        if _matches(path, self.inert):
            return "inert"
        if _matches(path, self.ships):
            return "ships"
        return "build"


def _matches(path: str, globs: Sequence[str]) -> bool:
    return any(fnmatchcase(path, g) for g in globs)


def decide(changes: Sequence[Change], rule: OverlayRule) -> Decision:
    """Whether C equals B's wheel with some shipped files replaced or removed."""
    if not changes:
        return Decision(True, "no file differs")
    replace: list[str] = []
    delete: list[str] = []
    for ch in changes:
        if "160000" in (ch.old_mode, ch.new_mode):
            return Decision(False, f"{ch.path} is a submodule pointer")
        if ch.status.startswith("T") or "120000" in (ch.old_mode, ch.new_mode):
            return Decision(False, f"{ch.path} is or becomes a symlink")
        kinds = {p: rule.kind(p) for p in (ch.old_path, ch.path) if p}
        bad = next((p for p, k in kinds.items() if k == "build"), None)
        if bad is not None:
            return Decision(False, f"{bad} changed and is not a file that ships as it is")
        gone: str | None
        new: str | None
        if ch.status.startswith("D"):
            gone, new = ch.path, None
        elif ch.status.startswith("R"):
            gone, new = ch.old_path, ch.path
        else:                               # A, M, C: the old copy stays where it is
            gone, new = None, ch.path
        if gone and kinds[gone] == "ships":
            delete.append(gone)
        if new and kinds[new] == "ships":
            replace.append(new)
    what = len(replace) + len(delete)
    return Decision(True, f"{what} shipped Python file(s) differ" if what
                    else "only tests or docs differ", tuple(replace), tuple(delete))


@dataclass(frozen=True)
class Base:
    index: int
    decision: Decision
    why: str


def choose_base(target: int, built: Iterable[int], decide_for: Callable[[int], Decision],
                lo: int, hi: int, limit: int = 6) -> Base | None:
    """The built commit nearest to `target` whose diff to it is overlay-safe.

    Of two equally near, the one on the side of the open interval (lo, hi) that `target`
    is nearer to: the search expects it to behave like that end. At most `limit` built
    commits are asked (each ask is a diff)."""
    expect_old = target - lo <= hi - target
    side = (lambda b: b < target) if expect_old else (lambda b: b > target)
    order = sorted((b for b in built if b != target),
                   key=lambda b: (abs(b - target), not side(b)))
    for b in order[:limit]:
        d = decide_for(b)
        if d.safe:
            where = "before" if b < target else "after"
            return Base(b, d, f"nearest built commit whose diff is overlay-safe: "
                              f"{abs(b - target)} commit(s) {where}; {d.reason}")
    return None


__all__ = ["Change", "Decision", "OverlayRule", "RuleError", "Base", "decide", "choose_base",
           "PYTORCH_RULE", "PRESETS", "OVERLAY_COST"]
