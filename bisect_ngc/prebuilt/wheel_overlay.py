"""Overlay probes: a built neighbour's wheel with a commit's shipped Python files put in.

`overlay.decide` says whether a diff allows it; this module finds the built neighbours in
the artifact store, asks git for the diffs, and writes the patched wheel as an artifact of
its own (keyed by the target and the base artifact, so it never passes for a real build).
Before a file is replaced or removed, its copy in the base wheel must equal the base
commit's source byte for byte: a file the build rewrites is caught even if the rule
missed it.
"""
from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path, PurePosixPath
from typing import Callable, Mapping

from ..core.artifacts import Artifact, ArtifactStore
from ..core.probes import ProbeKind, Source
from ..vcs.history import History
from ..vcs.changes import Change
from .overlay import OVERLAY_COST, Base, Decision, OverlayRule, choose_base, decide
from ..core.search import Verdict
from ..core.keys import digest


class OverlayRefused(Exception):
    """The base wheel does not hold the changed files as they are in git."""


class Overlays:
    """Overlay probes for one bisection's candidates."""

    def __init__(self, history: History, artifacts: ArtifactStore, candidates: list[str],
                 image: str, build_key: str, rule: OverlayRule,
                 say: Callable[[str], None] = lambda text: None, reach: int = 8):
        self.history = history
        self.store = artifacts
        self.candidates = candidates
        self.image = image
        self.build_key = build_key
        self.rule = rule
        self.say = say
        self.reach = reach              # how far from a built commit an overlay is tried
        self._diffs: dict[tuple[int, int], list[Change]] = {}
        self._decisions: dict[tuple[int, int], Decision] = {}

    def built(self, i: int) -> Artifact | None:
        """The candidate's own build, when it produced exactly one wheel."""
        art = self.store.get(ArtifactStore.key(self.candidates[i], self.image, self.build_key))
        if art is None or len(list(art.path.glob("*.whl"))) != 1:
            return None
        return art

    def diff(self, base: int, target: int) -> list[Change]:
        key = (base, target)
        if key not in self._diffs:
            self._diffs[key] = self.history.changes(self.candidates[base],
                                                    self.candidates[target])
        return self._diffs[key]

    def decision(self, base: int, target: int) -> Decision:
        key = (base, target)
        if key not in self._decisions:
            self._decisions[key] = decide(self.diff(base, target), self.rule)
        return self._decisions[key]

    def _bases(self, lo: int, hi: int) -> list[int]:
        """Built candidates in [lo, hi] (clipped to the range)."""
        return [b for b in range(max(lo, 0), min(hi, len(self.candidates) - 1) + 1)
                if self.built(b) is not None]

    def cheap(self, lo: int, hi: int, verdicts: Mapping[int, Verdict]) -> dict[int, float]:
        """Untested candidates inside (lo, hi) that an overlay can probe, with their cost
        relative to a build, for the search to weigh. Bases may lie outside (lo, hi):
        the ends of the interval are often overlays themselves."""
        found: dict[int, float] = {}
        for b in self._bases(lo - self.reach, hi + self.reach):
            for step in (-1, 1):
                for c in range(b + step, b + step * (self.reach + 1), step):
                    if (c <= lo and step < 0) or (c >= hi and step > 0):
                        break      # walking away from the interval
                    if not self.decision(b, c).safe:
                        break      # a wider diff holds this one: no safer further out
                    if lo < c < hi and c not in verdicts:
                        found[c] = OVERLAY_COST
        return found

    def source(self, target: int, lo: int, hi: int) -> Source | None:
        """How to probe `target` by overlay, or None when it must be built. Writes nothing."""
        if self.built(target) is not None:
            return None            # its own build exists: no reason to patch another
        bases = [b for b in self._bases(target - self.reach, target + self.reach)
                 if b != target]
        base = choose_base(target, bases, lambda b: self.decision(b, target), lo, hi)
        return None if base is None else self._source(target, base)

    def _source(self, target: int, base: Base) -> Source:
        sha = self.candidates[base.index]
        art = self.built(base.index)
        assert art is not None
        key = digest(["overlay", self.candidates[target], art.key])[:24]
        return Source(ProbeKind.OVERLAY, key, f"overlay of {sha[:12]}", reports=sha, why=base.why)

    def make(self, target: int, src: Source) -> bool:
        """Write the overlay artifact `src` names (once); False if the base refuses it."""
        if self.store.get(src.ref) is not None:
            return True
        base = self.candidates.index(src.reports)
        art = self.built(base)
        decision = self.decision(base, target)
        if art is None or not decision.safe:
            return False
        wheel = next(art.path.glob("*.whl"))
        changes = {ch.path: ch for ch in self.diff(base, target)}
        old_paths = {ch.old_path: ch for ch in changes.values() if ch.old_path}
        try:
            with self.store.staging(src.ref) as staging:
                written = overlay_wheel(
                    wheel, staging / wheel.name,
                    replace={p: self.history.blob(changes[p].new_blob) for p in decision.replace},
                    delete=decision.delete,
                    original=lambda p: self.history.blob(
                        (changes.get(p) or old_paths[p]).old_blob))
                self.store.publish(src.ref, staging, {
                    "commit": self.candidates[target], "overlay_of": src.reports,
                    "base_artifact": art.key, "image": self.image, "files": written,
                    "backend": "overlay"})
        except OverlayRefused as exc:
            self._decisions[(base, target)] = Decision(False, str(exc))
            self.say(f"no overlay for {self.candidates[target][:12]}: {exc}; building it")
            return False
        return True


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=") \
        .decode()


def wheel_path(repo_path: str, names: set[str], dirs: set[str]) -> str | None:
    """Where a repository file lives in a wheel: the path itself, or the path with leading
    directories dropped (a src/ layout), whichever first names an existing file or lies in
    an existing directory (deepest first)."""
    parts = PurePosixPath(repo_path).parts
    for drop in range(len(parts)):
        rest = parts[drop:]
        if "/".join(rest) in names:
            return "/".join(rest)
    for drop in range(len(parts) - 1):
        rest = parts[drop:]
        for depth in range(len(rest) - 1, 0, -1):
            if "/".join(rest[:depth]) in dirs:
                return "/".join(rest)
    return None


def overlay_wheel(base: Path, out: Path, *, replace: Mapping[str, bytes],
                  delete: tuple[str, ...], original: Callable[[str], bytes]) -> list[str]:
    """Copy wheel `base` to `out` with files replaced, added or removed (keys are repository
    paths), and its RECORD rewritten. Raises OverlayRefused when a file to change is not in
    the wheel exactly as `original(path)` gives it. Returns the wheel paths written."""
    with zipfile.ZipFile(base) as zin:
        infos = zin.infolist()
        names = {i.filename for i in infos if not i.is_dir()}
        dirs = {str(p) for n in names for p in PurePosixPath(n).parents if str(p) != "."}
        record = next((n for n in names if n.endswith(".dist-info/RECORD")), None)
        if record is None:
            raise OverlayRefused(f"{base.name} has no .dist-info/RECORD")
        plan: dict[str, bytes | None] = {}
        for repo_path in (*delete, *replace):
            where = wheel_path(repo_path, names, dirs)
            if where is None:
                raise OverlayRefused(f"cannot tell where {repo_path} goes in {base.name}")
            if where in names and zin.read(where) != original(repo_path):
                raise OverlayRefused(f"{repo_path} in {base.name} differs from its source "
                                     "(the build changes it)")
            if repo_path in delete and where not in names:
                raise OverlayRefused(f"{repo_path} is not in {base.name}")
            plan[where] = replace.get(repo_path) if repo_path in replace else None
        rows = []
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zout:
            for info in infos:
                if info.filename == record or info.filename in plan or info.is_dir():
                    continue
                data = zin.read(info)
                zout.writestr(info, data, compresslevel=1)
                rows.append(f"{info.filename},{_record_hash(data)},{len(data)}")
            for where, content in sorted(plan.items()):
                if content is not None:
                    info = zipfile.ZipInfo(where, date_time=(1980, 1, 1, 0, 0, 0))
                    info.external_attr = 0o644 << 16
                    zout.writestr(info, content, zipfile.ZIP_DEFLATED, compresslevel=1)
                    rows.append(f"{where},{_record_hash(content)},{len(content)}")
            rows.append(f"{record},,")
            zout.writestr(record, "\n".join(rows) + "\n")
    return sorted(plan)
