"""Probes against `git bisect run` on histories with a stretch of untestable commits:
python -m benchmarks.skips [--histories 200] [--seed 1] [--before REV]

Each history is a real repository (tests.lib.repos.make_repo) of 12-400 commits with one
stretch of 1-12 commits that do not build; in half of them the change of behaviour is
next to the stretch or inside it, as when the commit that broke the build changed the
behaviour too. `git bisect run` runs on it for real; bisect-ngc's search (--jobs 1, what
the CLI runs) is replayed on the same verdicts. git is handed both endpoints, so the
counts below leave out bisect-ngc's two endpoint probes. --before REV also replays the
search as it was at REV, for comparison.
"""
from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bisect_ngc.core import search  # noqa: E402
from tests.lib.repos import make_repo  # noqa: E402

STEP = "test -e broken && exit 125; test \"$(cat behaviour)\" = old"


def git_bisect(repo: Path, shas: list[str]) -> list[str]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True).stdout
    git("bisect", "start", shas[-1], shas[0])
    git("bisect", "run", "sh", "-c", STEP)
    return [ln.split()[2] for ln in git("bisect", "log").splitlines()
            if ln.startswith("git bisect ") and ln.split()[2] in ("good", "bad", "skip")]


def replay(module, n: int, t: int, stretch: set[int]) -> list[int]:
    verdicts: dict = {}
    order: list[int] = []
    while True:
        step = module.next_step(n, verdicts)
        if not isinstance(step, module.Round):
            return order[2:]
        for i in step.indices:
            verdicts[i] = (module.Verdict.SKIP if i in stretch else
                           module.Verdict.FAIL if i >= t else module.Verdict.PASS)
            order.append(i)


def histories(count: int, seed: int):
    rng = random.Random(seed)
    while count:
        n = rng.randint(12, 400)
        length = rng.randint(1, 12)
        start = rng.randint(1, n - 1 - length)
        t = (rng.choice([start, start + length, start + rng.randint(0, length)])
             if rng.random() < 0.5 else rng.randint(1, n - 1))
        yield n, t, set(range(start, start + length))
        count -= 1


def module_at(rev: str):
    source = subprocess.run(["git", "show", f"{rev}:bisect_ngc/search.py"], capture_output=True,
                            text=True, check=True, cwd=Path(__file__).resolve().parents[1]).stdout
    spec = importlib.util.spec_from_loader(f"search_{rev}", loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # dataclasses look their module up
    exec(compile(source, f"search@{rev}", "exec"), module.__dict__)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--histories", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--before", default=None, metavar="REV")
    args = ap.parse_args()
    searches = {"now": search}
    if args.before:
        searches[args.before] = module_at(args.before)
    rows: dict[str, list[tuple[int, int, int]]] = {name: [] for name in searches}
    with tempfile.TemporaryDirectory() as tmp:
        for k, (n, t, stretch) in enumerate(histories(args.histories, args.seed)):
            repo = Path(tmp) / f"h{k}"
            steps = git_bisect(repo, make_repo(repo, n, t, stretch))
            git_tested = sum(s != "skip" for s in steps)
            for name, module in searches.items():
                order = replay(module, n, t, stretch)
                tested = sum(i not in stretch for i in order)
                rows[name].append((len(order) - len(steps), tested - git_tested,
                                   len(order) - (search.ceil_log(n - 1, 2) + len(stretch))))
    print(f"{args.histories} histories (seed {args.seed}); difference to git bisect run, "
          "in probes (skips included) and in tested commits\n")
    print("| search | probes: median | max | mean | above git + 2 | tested: median | max | "
          "above ⌈log2 n⌉ + L + 2 |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, diffs in rows.items():
        probes = [d[0] for d in diffs]
        tested = [d[1] for d in diffs]
        print(f"| {name} | {statistics.median(probes):+g} | {max(probes):+d} | "
              f"{statistics.mean(probes):+.2f} | {sum(p > 2 for p in probes)} | "
              f"{statistics.median(tested):+g} | {max(tested):+d} | "
              f"{sum(d[2] > 2 for d in diffs)} |")


if __name__ == "__main__":
    main()
