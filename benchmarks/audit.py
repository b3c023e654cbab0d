"""The reliability audit's repeatable trials, on real processes and real repositories.

    python -m benchmarks.audit [--kills 15] [--races 10]

- kills: a bisection with --jobs 2 is SIGKILLed at a random moment, then the same command
  is run to the end. Counts wrong answers, test processes still running after the resumed
  run (orphans), and commits tested more than once (at most the probes in flight may be).
- races: two bisections of one URL with one --cache-dir (separate --state), started
  together. Counts runs that fail or answer wrongly.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.lib.repos import BUILD, TEST, make_repo  # noqa: E402

JOBS = 2


def bisect(repo: str, state: Path, test: str, cache: Path) -> list[str]:
    return [sys.executable, "-m", "bisect_ngc", "bisect", "--repo", repo, "--old", "main~119",
            "--new", "main", "--build", BUILD, "--test", test, "--state", str(state),
            "--cache-dir", str(cache), "--jobs", str(JOBS), "--quiet", "--json"]


def running_groups(pgids: list[int]) -> list[int]:
    alive = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            alive.add(int(fields[2]))
    return [p for p in pgids if p in alive]


def kill_trial(root: Path, rng: random.Random) -> dict:
    transition = rng.randrange(5, 115)
    shas = make_repo(root / "r", 120, transition)
    log = root / "tested"
    test = f'echo "$$ $BISECT_COMMIT" >> {log}; sleep 0.3; ' + TEST
    argv = bisect(str(root / "r"), root / "st", test, root / "cache")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(rng.uniform(0.8, 4.0))
    proc.kill()
    proc.communicate()
    first = log.read_text().split("\n") if log.exists() else []
    pgids = [int(line.split()[0]) for line in first if line]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    res = json.loads(done.stdout)
    commits = [line.split()[1] for line in log.read_text().split("\n") if line]
    return {"right": res.get("first_new") == shas[transition] and done.returncode == 0,
            "orphans": len(running_groups(pgids)),
            "repeated": len(commits) - len(set(commits))}


def race_trial(root: Path) -> int:
    shas = make_repo(root / "r", 120, 77)
    url = (root / "r").as_uri()
    procs = [subprocess.Popen(bisect(url, root / f"st{i}", TEST, root / "cache"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    failures = 0
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        ok = proc.returncode == 0 and json.loads(out).get("first_new") == shas[77]
        failures += not ok
    return failures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=15)
    ap.add_argument("--races", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    kills = []
    for i in range(args.kills):
        with tempfile.TemporaryDirectory() as tmp:
            kills.append(kill_trial(Path(tmp), rng))
        print(f"kill trial {i + 1}: {kills[-1]}", file=sys.stderr)
    races = []
    for i in range(args.races):
        with tempfile.TemporaryDirectory() as tmp:
            races.append(race_trial(Path(tmp)))
        print(f"race trial {i + 1}: {races[-1]} failed run(s)", file=sys.stderr)
    print(json.dumps({
        "kill_trials": len(kills), "wrong_answers": sum(not k["right"] for k in kills),
        "orphans": sum(k["orphans"] for k in kills),
        "max_repeated_tests": max((k["repeated"] for k in kills), default=0),
        "probes_in_flight": JOBS,
        "race_trials": len(races), "race_failures": sum(races)}))


if __name__ == "__main__":
    main()
