"""Swap probes between two images: the Attributor runs attribution's search over the
components that differ (inventory, extraction and each swap through a Containers engine),
and ImageSwaps asks it what the bisection needs of release images. Every outcome is kept
in the swap log as it comes, so the same command resumes."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from .search import Attribution, Side, Swap, fresh, next_swaps
from .scripts import EXTRACT_SCRIPT, INVENTORY_SCRIPT
from ..core.probes import Containers
from .components import (Component, Evidence, cannot_swap, diff, env_of,
                         extraction_plan, layout, safe)
from ..errors import UserError
from .swap_log import SwapLog
from .suspects import suspects
from ..images.image_config import Row, diff as config_rows


class Attributor:
    """Image A against image B: inventory, diff, then ddmin over swap probes. Every
    outcome is written to the swap log as it comes, so the same command resumes."""

    def __init__(self, a: str, b: str, test: str, work: Path, engine: Containers,
                 say: Callable[[str], None], evidence: Evidence = Evidence(),
                 test_identity: Any = None, symptom: str | None = None):
        self.images = {"a": a, "b": b}
        self.test, self.work, self.engine, self.say = test, work, engine, say
        self.evidence, self.symptom = evidence, symptom
        self.digests = {side: engine.digest(image) for side, image in self.images.items()}
        # Outcomes are shared only under the same images, test (with the content of the
        # scripts it names) and runs per swap; rows of an earlier version never match.
        key = hashlib.sha256(json.dumps(
            [self.digests, test if test_identity is None else test_identity,
             {"repeat": evidence.repeat, "policy": evidence.policy.value}]).encode())
        self.log = SwapLog(work / "swaps.sqlite", key.hexdigest()[:12])

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

    def swap_only(self, units: list[str], check: int = 0) -> Side | None:
        """One swap of A with B's `units` (its `check`-th fresh run), or None where they
        do not differ, cannot be swapped, or the images as they are give no two
        behaviours to tell apart."""
        inv = {side: self.inventory(side) for side in ("a", "b")}
        comps = {c.unit: c for c in diff(inv["a"], inv["b"])}
        chosen = [comps[u] for u in units if u in comps]
        pythons = (inv["a"]["python"], inv["b"]["python"])
        if not chosen or any(cannot_swap(c, "a", *pythons) for c in chosen):
            return None
        plain = self._plain()
        if "skip" in plain.values() or plain["a"] == plain["b"]:
            return None
        swap = Swap.of("a", [c.unit for c in chosen], check)
        stored = self.log.outcomes().get(_key_of(swap))
        if stored is not None:
            return Side(stored[0])
        extracted = {side: self.extract(side, inv[side], [c.unit for c in chosen])
                     for side in ("a", "b")}
        side, why = self._swap(swap, chosen, inv, extracted, plain)
        self.log.put(_key_of(swap), side.value, why)
        return side

    def _plain(self) -> dict[str, str]:
        """Both images' own verdicts, each from runs under the repeat policy."""
        stored = {k: outcome for k, (outcome, _) in self.log.outcomes().items()}
        for side in ("a", "b"):
            if f"plain:{side}" not in stored:
                stored[f"plain:{side}"] = self.evidence.judge(
                    lambda n: self.engine.run(self.images[side], self.test, _run_env(n), []))
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
                               "unswappable": {}, "swaps": [], "checks": []}
        if "skip" in plain.values() or plain["a"] == plain["b"]:
            out["attribution"] = Attribution(
                "invalid-endpoints", explanation=f"A {plain['a']}s and B {plain['b']}s as they "
                                                 f"are: nothing to attribute")
            return out
        pythons = (inv["a"]["python"], inv["b"]["python"])
        out["unswappable"] = {c.unit: why for c in comps
                              if (why := cannot_swap(c, "a", *pythons))}
        units = [u for u in by_unit if u not in out["unswappable"]]
        moved = config_diff(*(inv[side]["env"] for side in ("a", "b")))
        out["config_diff"] = [r.__dict__ for r in moved]
        out["suspects"] = suspects(units, {r.name for r in moved if r.kind == "component"},
                                   self.symptom)[0]
        extracted = {side: self.extract(side, inv[side], units) for side in ("a", "b")}
        stored = {_swap_of(k): v for k, v in self.log.outcomes().items()
                  if not k.startswith("plain:")}
        # Swaps of other components (an earlier question with --only) are not this search's.
        seen = {s: Side(side) for s, (side, _) in stored.items() if s.components <= set(units)}
        whys = {s: why for s, (_, why) in stored.items()}
        while isinstance(step := next_swaps(units, seen, verify=self.evidence.verify,
                                            unswappable=sorted(out["unswappable"]),
                                            suspects=out["suspects"]), list):
            for swap in step:
                side, whys[swap] = self._swap(swap, [by_unit[u] for u in sorted(swap.components)],
                                              inv, extracted, plain)
                seen[swap] = side
                self.log.put(_key_of(swap), side.value, whys[swap])
        out["attribution"] = step
        rows = [{"into": s.into, "components": sorted(s.components), "side": v.value,
                 "why": whys.get(s, ""), "check": s.check} for s, v in seen.items()]
        out["swaps"] = [r for r in rows if not r["check"]]
        out["checks"] = [r for r in rows if r["check"]]     # fresh runs behind the answer
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
        env = dict(lay.env, **lay.search_paths(inv[target]["env"]))
        mounts = [(extracted[donor], str(extracted[donor]), True),
                  (lay.directory, str(lay.directory), True)]
        if lay.imports:
            code, out = self.engine.output(self.images[target], lay.import_check(), env, mounts)
            if code != 0:
                why = (out.strip().splitlines() or [f"exit {code}"])[-1]
                self.say(f"  {label}: skip (does not load: {why})")
                return Side.SKIP, f"does not load: {why}"
        verdict = self.evidence.judge(lambda n: self.engine.run(
            self.images[target], lay.command(self.test), dict(env, **_run_env(n)), mounts))
        side = Side.B if verdict == plain["b"] else Side.A if verdict == plain["a"] else Side.SKIP
        self.say(f"  {label} ({', '.join(c.unit for c in comps)}): {verdict}, like "
                 f"{side.value.upper() if side is not Side.SKIP else 'neither'}")
        return side, ""


def config_diff(env_a: dict[str, str], env_b: dict[str, str]) -> list[Row]:
    """What the two images' configs say moved (their environments' *_VERSION variables
    and behaviour defaults), read from the configs the inventories hold."""
    def config(env: dict[str, str]) -> dict[str, Any]:
        return {"config": {"Env": [f"{k}={v}" for k, v in env.items()]}}
    return config_rows(config(env_a), config(env_b))


def _run_env(number: int) -> dict[str, str]:
    """What a test run is told: which of a swap's (or an image's) repeated runs it is."""
    return {"BISECT_RUN": str(number)}


def _key_of(swap: Swap) -> str:
    return json.dumps([swap.into, sorted(swap.components)] + ([swap.check] if swap.check else []))


def _swap_of(key: str) -> Swap:
    into, units, *check = json.loads(key)
    return Swap.of(into, units, *check)


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
                 unit: str = "py:torch", evidence: Evidence = Evidence(),
                 test_identity: Any = None, symptom: str | None = None):
        self.engine, self.work, self.test, self.say = engine, work, test, say
        self.symptom = symptom
        self.unit = unit          # the distribution whose commits are bisected
        self.evidence, self.test_identity = evidence, test_identity

    def _of(self, a: str, b: str) -> Attributor:
        return Attributor(a, b, self.test, self.work, self.engine, self.say, self.evidence,
                          self.test_identity, self.symptom)

    def carries(self, a: str, b: str) -> bool | None:
        """Whether A with B's files of the bisected distribution behaves like B. "No"
        ends a session (nothing is built), so it also needs fresh swaps that settle on A;
        where they do not, None: the builds decide."""
        attributor = self._of(a, b)
        side = attributor.swap_only([self.unit])
        if side is None or side is Side.SKIP:
            return None
        if side is Side.B:
            return True
        again = fresh(lambda swap: attributor.swap_only([self.unit], swap.check) or Side.SKIP,
                      Swap.of("a", [self.unit]), self.evidence.verify)
        return False if again is Side.A else None

    def attribute(self, a: str, b: str) -> dict[str, Any]:
        found = self._of(a, b).run()
        answer = found.pop("attribution")
        return dict(found, status=answer.status, culprits=list(answer.culprits),
                    explanation=answer.explanation)
