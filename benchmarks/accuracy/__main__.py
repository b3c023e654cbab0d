"""How often bisect-ngc's answer is right, against `git bisect run`, on planted cases:
python -m benchmarks.accuracy [--quick] [--seed 1] [--only FAMILY ...] [--out DIR]

Every case is generated from the seed: real git repositories with the answer planted
(tests/lib/histories.py, tests/lib/merge_shapes.py), run through the real CLI with the
local backend, and through `git bisect run` on the same scripts. The families that need
thousands of sessions or a container engine run in-process (benchmarks/accuracy/
simulated.py). The table goes to DIR/accuracy.md and DIR/accuracy.json; each wrong answer
comes with the command that runs its case alone (--only FAMILY --case K).
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.accuracy import families, table  # noqa: E402
from benchmarks.accuracy.outcomes import Outcome  # noqa: E402
from benchmarks.accuracy.runners import reproduce  # noqa: E402
from benchmarks.accuracy.simulated import calibrated_reruns  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def run(only: list[str], size: families.Size, seed: int, case: int | None,
        say=print) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for family in only:
        start = time.monotonic()
        if family in ("linear", "merges", "intermittent", "null"):
            for k, mine, theirs in families.run_cli_family(family, size, seed, case):
                outcomes += [mine] + ([theirs] if theirs else [])
                if mine.grade == "wrong":
                    say(f"  wrong: {family} case {k}: {mine.status} {mine.named} "
                        f"({mine.reproduce})")
        if family in families.ENGINE:
            engine = families.ENGINE[family](size, seed, case)
            for o in engine:
                o.reproduce = reproduce(family, seed, o.seed)
            outcomes += engine
        say(f"{family}: {sum(o.family == family for o in outcomes)} answers in "
            f"{time.monotonic() - start:.0f} s")
    return outcomes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the subset CI runs (a few minutes)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", nargs="+", choices=families.FAMILIES, default=None)
    ap.add_argument("--case", type=int, default=None,
                    help="run case K alone (in-process families: session K of each cell)")
    ap.add_argument("--sessions", type=int, default=None, metavar="N",
                    help="in-process sessions per intermittent cell (default 200; 25 quick)")
    ap.add_argument("--metric-trials", type=int, default=None, metavar="N",
                    help="simulated metric sessions per cell (default 30; 3 quick)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args()
    size = families.QUICK if args.quick else families.DEFAULT
    if args.sessions is not None:
        size = replace(size, flaky_engine=args.sessions)
    if args.metric_trials is not None:
        size = replace(size, metric_trials=args.metric_trials)
    only = args.only or list(families.FAMILIES)
    outcomes = run(only, size, args.seed, args.case)
    command = "python -m benchmarks.accuracy " + shlex.join(sys.argv[1:])
    text = table.markdown(outcomes, args.seed, command.strip())
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "accuracy-quick" if args.quick else "accuracy"
    (args.out / f"{stem}.md").write_text(text)
    (args.out / f"{stem}.json").write_text(json.dumps({
        "seed": args.seed, "command": command.strip(), "rows": table.rows(outcomes),
        "calibrated_reruns": {f"q={q:g} eps={eps:g}": calibrated_reruns(q, eps, 32)
                              for q, eps in families.FLAKES},
        "wrong": [o.as_dict() for o in outcomes if o.grade == "wrong"]}, indent=1))
    print(text)
    print(f"written: {args.out / stem}.md and .json")
    wrong = [o for o in outcomes if o.grade == "wrong" and o.who.startswith("bisect")
             and families.claimed(o.family, o.cell)]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
