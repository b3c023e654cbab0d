"""How often a flaky test makes the bisection name a wrong commit with exit 0, with and
without the answer's fresh re-run (issue 30, finding 7):
python -m benchmarks.verified_answers [--sessions 200] [--commits 16] [--fail-rate 0.5]

The real engine (bisect_ngc.core.engine.Bisection, its store and search) over a generated
repository, with a backend that runs no process: each test run of a commit at or after
the transition fails with chance --fail-rate (else passes), seeded; runs before it pass.
Every probe gets --repeat runs under --repeat-policy, as the backends judge them
(verdicts.judge_probe). Counted per --verify: found right, found wrong (the bug class),
ambiguous, and the probes and runs spent.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.lib.repos import make_repo  # noqa: E402
from bisect_ngc.core.inputs import Range, Settings  # noqa: E402
from bisect_ngc.core.engine import Bisection  # noqa: E402
from bisect_ngc.vcs.history import History  # noqa: E402
from bisect_ngc.core.recipes import Recipe  # noqa: E402
from bisect_ngc.core.search import RepeatPolicy  # noqa: E402
from bisect_ngc.core.store import Store  # noqa: E402
from bisect_ngc.core.verdicts import RunFact, judge_probe  # noqa: E402
from tests.lib.fakes import ScriptedBackend  # noqa: E402


class FlakyRuns(ScriptedBackend):
    """A backend whose test runs are drawn, not executed."""

    def __init__(self, transition: int, fail_rate: float, rng: random.Random):
        super().__init__(lambda i: None)
        self.transition, self.fail_rate, self.rng = transition, fail_rate, rng
        self.runs = 0

    def run_round(self, requests, on_phase):
        for req in requests:
            facts = []
            for _ in range(req.runs):
                self.runs += 1
                fails = req.index >= self.transition and self.rng.random() < self.fail_rate
                facts.append(RunFact(1 if fails else 0))
                if fails and req.policy is RepeatPolicy.ANY:
                    break
            yield req, judge_probe(None, facts, req.policy)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--commits", type=int, default=16)
    ap.add_argument("--fail-rate", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--policy", default="any")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="verified-answers-"))
    transition = args.commits // 2
    shas = make_repo(work / "r", args.commits, transition)
    history = History.open(str(work / "r"), work / "cache")
    span = Range(history, shas[0], shas[-1], shas, history.identity(shas[-1]), {"old": "a"})
    print(f"{args.commits} commits, transition at {transition}, new commits fail "
          f"{args.fail_rate:.0%} of runs, --repeat {args.repeat} --repeat-policy {args.policy}, "
          f"{args.sessions} sessions each\n")
    print("| --verify | found, right | found, WRONG | ambiguous | other | runs, median |")
    print("|---:|---:|---:|---:|---:|---:|")
    for verify in (0, 1, 3):
        rng = random.Random(30)
        tally = {"right": 0, "wrong": 0, "ambiguous": 0, "other": 0}
        runs = []
        for k in range(args.sessions):
            backend = FlakyRuns(transition, args.fail_rate, rng)
            settings = Settings(repeat=args.repeat, policy=RepeatPolicy(args.policy),
                                verify=verify)
            res = Bisection(Store(work / f"st-{verify}-{k}"), span,
                            Recipe(build=None, test="t"), backend, settings).run()
            runs.append(backend.runs)
            if res.status == "found":
                tally["right" if res.first_new == shas[transition] else "wrong"] += 1
            else:
                tally["ambiguous" if res.status == "ambiguous" else "other"] += 1
        print(f"| {verify} | {tally['right']} | {tally['wrong']} | {tally['ambiguous']} | "
              f"{tally['other']} | {statistics.median(runs):g} |")


if __name__ == "__main__":
    main()
