"""Core benchmarks: python -m benchmarks.core [--quick]

(a) first-parent enumeration of 1k/10k/100k-commit repositories (median of 5);
(b) probes and rounds against `git bisect run` on one generated repository, K = 1, 2, 4, 8;
(c) controller overhead per probe with a no-op build and test.

The runs are started as an installed package runs: with .pyc files (pip compiles them at
install), so PYTHONDONTWRITEBYTECODE is unset for them.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bisect_ngc.vcs.history import History  # noqa: E402
from tests.lib.repos import BUILD, TEST, make_repo  # noqa: E402


def bisect_ngc(*args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run([sys.executable, "-m", "bisect_ngc", "bisect", *args, "--json",
                          "--quiet"], capture_output=True, text=True, env=env)
    if out.returncode not in (0, 3, 4):
        raise SystemExit(out.stderr)
    return json.loads(out.stdout)


def enumeration(tmp: Path, sizes: list[int]) -> None:
    print("\n(a) first-parent enumeration (History.candidates), median of 5\n")
    print("| commits | generate (s) | enumerate (s) |\n|---:|---:|---:|")
    for n in sizes:
        t0 = time.perf_counter()
        shas = make_repo(tmp / f"enum{n}", n, n // 2, side_branch_every=10, pr_every=0)
        gen = time.perf_counter() - t0
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            h = History.open(str(tmp / f"enum{n}"), tmp)
            cands = h.candidates(h.resolve(shas[0]), h.resolve("main"))
            times.append(time.perf_counter() - t0)
        assert len(cands) == n
        print(f"| {n:,} | {gen:.1f} | {statistics.median(times):.3f} |")


def against_git(tmp: Path, n: int, t: int, stretches: str) -> None:
    from benchmarks.genrepo import parse_ranges
    repo = tmp / "vsgit"
    shas = make_repo(repo, n, t, parse_ranges(stretches))
    script = tmp / "step.sh"
    script.write_text(f"#!/bin/sh\nexport BISECT_ARTIFACTS=$(mktemp -d)\necho x >> {tmp}/gitcount\n"
                      f"{BUILD} || exit 125\n{TEST}\n")
    script.chmod(0o755)
    git = lambda *a: subprocess.run(["git", *a], cwd=repo, capture_output=True, check=True)  # noqa
    git("bisect", "start", "--first-parent", "main", shas[0])
    t0 = time.perf_counter()
    git("bisect", "run", str(script))
    git_wall = time.perf_counter() - t0
    git("bisect", "reset")
    git_steps = len((tmp / "gitcount").read_text().split())
    print(f"\n(b) {n} commits, transition at {t}, unbuildable {stretches}\n")
    print("| tool | probes | rounds | wall (s) | found |\n|---|---:|---:|---:|---|")
    print(f"| git bisect run | {git_steps} | {git_steps} | {git_wall:.1f} | - |")
    for k in (1, 2, 4, 8):
        t0 = time.perf_counter()
        res = bisect_ngc("--repo", str(repo), "--old", shas[0], "--new", "main", "--build", BUILD,
                         "--test", TEST, "--jobs", str(k), "--state", str(tmp / f"st{k}"))
        wall = time.perf_counter() - t0
        ok = res["first_new"] == shas[t]
        print(f"| bisect-ngc --jobs {k} | {res['probes']} | {res['rounds']} | {wall:.1f} | {ok} |")


def overhead(tmp: Path, n: int) -> None:
    repo = tmp / "noop"
    shas = make_repo(repo, n, n // 3)
    walls = []
    for i in range(5):
        t0 = time.perf_counter()
        res = bisect_ngc("--repo", str(repo), "--old", shas[0], "--new", "main", "--build", "true",
                         "--test", TEST.replace('"$BISECT_ARTIFACTS/out"', "behaviour"),
                         "--state", str(tmp / f"noop{i}"))
        walls.append((time.perf_counter() - t0) / res["probes"])
    t0 = time.perf_counter()
    for _ in range(20):
        subprocess.run(["/bin/sh", "-c", "true"], check=True)
        subprocess.run(["/bin/sh", "-c", "true"], check=True)
    bare = (time.perf_counter() - t0) / 20
    print(f"\n(c) controller overhead, {n} commits, no-op build and test, median of 5 runs\n")
    print(f"- wall per probe: {statistics.median(walls) * 1000:.0f} ms "
          f"(of which spawning two shells: {bare * 1000:.0f} ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="1k and 10k only")
    ap.add_argument("--only", choices="abc", help="run one part")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if args.only in (None, "a"):
            enumeration(tmp, [1_000, 10_000] + ([] if args.quick else [100_000]))
        if args.only in (None, "b"):
            against_git(tmp, 600, 377, "120-139,300-309,370-372")
        if args.only in (None, "c"):
            overhead(tmp, 300)


if __name__ == "__main__":
    main()
