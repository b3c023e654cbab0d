"""Builds per answer with kept local builds, against `git bisect run`:
python -m benchmarks.kept_builds [--commits 132] [--transition 77]

A package with a C extension built in place (`setup.py build_ext --inplace`, as
markupsafe's speedups), one commit changing what it returns. `git bisect run` builds and
tests at each step; bisect-ngc (local backend, default settings: the answer's pair run
again 3 + 3 times) runs the same build and test, then the same command again, then with a
changed --test, then the first command with --rebuild on a new state (every probe builds:
the behaviour before builds were kept). Builds are counted by the build command itself.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.lib.repos import make_cext_repo  # noqa: E402

BUILD = 'echo x >> "$BUILDS"; python3 setup.py -q build_ext --inplace >/dev/null 2>&1'
TEST = 'python3 -c "import fastmod, sys; sys.exit(fastmod.answer() != 41)"'


def git_bisect(repo: Path, shas: list[str], builds: Path) -> tuple[int, int, float]:
    """(builds, steps, seconds) of `git bisect run` on the same build and test."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                              env=dict(os.environ, BUILDS=str(builds))).stdout
    start = time.monotonic()
    git("bisect", "start", shas[-1], shas[0])
    git("bisect", "run", "sh", "-c", f"git clean -qfdx; {BUILD} || exit 125; {TEST}")
    steps = sum(1 for ln in git("bisect", "log").splitlines()
                if ln.startswith("git bisect ") and ln.split()[2] in ("good", "bad", "skip"))
    git("bisect", "reset")
    return _count(builds), steps, time.monotonic() - start


def tool(repo: Path, state: Path, builds: Path, test: str, *extra: str
         ) -> tuple[int, dict, float]:
    before = _count(builds)
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "bisect_ngc", "bisect", "--repo", str(repo), "--old", "main~"
         + str(_count_commits(repo) - 1), "--new", "main", "--build", BUILD, "--test", test,
         "--state", str(state), "--quiet", "--json", *extra],
        capture_output=True, text=True, env=dict(os.environ, BUILDS=str(builds)))
    return _count(builds) - before, json.loads(out.stdout), time.monotonic() - start


def _count(builds: Path) -> int:
    return len(builds.read_text().split()) if builds.exists() else 0


def _count_commits(repo: Path) -> int:
    return int(subprocess.run(["git", "rev-list", "--count", "main"], cwd=repo,
                              capture_output=True, text=True, check=True).stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=132)
    ap.add_argument("--transition", type=int, default=77)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shas = make_cext_repo(root / "repo", args.commits, args.transition)
        builds = root / "builds"
        rows = [("git bisect run", *git_bisect(root / "repo", shas, builds))]
        for label, state, test, extra in (
                ("bisect-ngc, first run", "st", TEST, ()),
                ("bisect-ngc, the same command again", "st", TEST, ()),
                ("bisect-ngc, a changed --test", "st", TEST + " && true", ()),
                ("bisect-ngc --rebuild, a new state (builds not kept)", "st2", TEST,
                 ("--rebuild",))):
            n, res, secs = tool(root / "repo", root / state, builds, test, *extra)
            assert res.get("first_new") == shas[args.transition], res
            runs = res["runs"] + res["verification"]["runs"]
            rows.append((label, n, runs, secs))
    print(f"{args.commits} commits, the change at #{args.transition}\n")
    print("| run | builds | test runs | seconds |\n|---|---|---|---|")
    for label, n, runs, secs in rows:
        print(f"| {label} | {n} | {runs} | {secs:.1f} |")


if __name__ == "__main__":
    main()
