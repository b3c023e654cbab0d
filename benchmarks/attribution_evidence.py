"""How often attribution names a wrong component, before and after issue 30:
python -m benchmarks.attribution_evidence [--trials 2000] [--before REV]

Simulated images of 12 differing components, one culprit or two needed together (a
random monotone rule), and swaps whose observations are skips or the wrong side at a
seeded rate. "before" is the attribution search as it was at REV (default: the last
commit before issue 30's work), read from git; "after" is the working tree's. Counts,
over the answers that name components:
- wrong name: a named component whose removal does not flip the outcome (in truth);
- missed: the named set does not turn A into B, or B with A's set does not turn back.
"""
from __future__ import annotations

import argparse
import random
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bisect_ngc.attribution import search as after  # noqa: E402

BEFORE = "99a11b4"


def load_before(rev: str) -> types.ModuleType:
    text = subprocess.run(["git", "show", f"{rev}:bisect_ngc/attribution.py"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    module = types.ModuleType("attribution_before")
    sys.modules[module.__name__] = module
    exec(compile(text, "attribution_before.py", "exec"), module.__dict__)
    return module


def trial(mod: types.ModuleType, rng: random.Random, skip: float, flake: float,
          n: int = 12) -> tuple[bool, bool, bool, int]:
    """(found, a wrong name, a missed culprit, swaps run) for one attribution; the names
    counted are those of a `found` answer (an unconfirmed one names none for sure)."""
    names = [f"c{k:02d}" for k in range(n)]
    need = frozenset(rng.sample(names, rng.choice((1, 2))))
    truth_a = lambda s: need <= s                           # noqa: E731  A with B's s is B
    truth = lambda sw: (truth_a(sw.components) if sw.into == "a"     # noqa: E731
                        else truth_a(frozenset(names) - sw.components))
    seen: dict = {}
    while not isinstance(step := mod.next_swaps(names, seen), mod.Attribution):
        for swap in step:
            r = rng.random()
            right = mod.Side.B if truth(swap) else mod.Side.A
            wrong = mod.Side.A if right is mod.Side.B else mod.Side.B
            seen[swap] = mod.Side.SKIP if r < skip else wrong if r < skip + flake else right
    named = frozenset(step.culprits)
    if step.status != "found":
        return False, False, False, len(seen)
    wrong_name = any(truth_a(named - {c}) for c in named)
    missed = not truth_a(named) or truth_a(frozenset(names) - named)
    return True, wrong_name, missed, len(seen)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--before", default=BEFORE)
    args = ap.parse_args()
    versions = {"before": load_before(args.before), "after": after}
    print("| skips | wrong sides | version | found | wrong name | missed culprit | swaps, mean |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    for skip, flake in ((0.01, 0), (0.05, 0), (0.10, 0), (0, 0.05)):
        for label, mod in versions.items():
            rng = random.Random(30)
            rows = [trial(mod, rng, skip, flake) for _ in range(args.trials)]
            found = sum(f for f, _, _, _ in rows)
            wrong = sum(w for _, w, _, _ in rows)
            missed = sum(m for _, _, m, _ in rows)
            mean = sum(s for _, _, _, s in rows) / len(rows)
            print(f"| {skip:.0%} | {flake:.0%} | {label} | {found} | {wrong} "
                  f"({wrong / args.trials:.2%}) | {missed} ({missed / args.trials:.2%}) | "
                  f"{mean:.1f} |")


if __name__ == "__main__":
    main()
