"""What `--with` costs: builds, probes and wall time of one bisection of the generated
torch stand-in (tests/lib/companion_repos.py) without a companion, with a git companion
rebuilt for each probed torch, and the same question again on the same cache.

    python -m benchmarks.companions [--image IMAGE] [--repeat 3]

Needs scripts/docker-up.sh (the Docker engine and the test image). Prints one JSON line
per run and a median table; each run gets a fresh cache except "again", which reuses the
"with" run's cache with another test command (so no verdict is reused, only builds).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.lib.companion_repos import BUILD, TEST, WITH_BUILD, make_companion_repos

IMAGE = "bisect-ngc-test/debian-build:bookworm-git"
# Without a companion the test installs the torch wheel itself and asks torch directly.
PLAIN_TEST = ('pip install -q --no-deps --break-system-packages "$BISECT_ARTIFACTS"/*.whl && '
              'python3 -c "import torch, sys; sys.exit(torch.behaviour != \'old\')"')


def bisect(repo: Path, shas: list[str], work: Path, image: str, *extra: str,
           test: str = TEST) -> dict:
    argv = [sys.executable, "-m", "bisect_ngc", "bisect", "--repo", str(repo), "--old", shas[0],
            "--new", shas[-1], "--backend", "docker", "--image", image, "--gpus", "none",
            "--build", BUILD, "--test", test, "--state", str(work / "st"),
            "--cache-dir", str(work / "cache"), "--quiet", "--json", *extra]
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"bisect failed ({proc.returncode}): {proc.stderr[-2000:]}")
    res = json.loads(proc.stdout)
    from bisect_ngc.core.store import Store
    probes = Store(work / "st").probes(res["session"])
    companions = sum(len(p.details.get("companions_built") or []) for p in probes)
    return {"wall_s": round(wall, 2), "probes": len(probes), "torch_builds": res["builds"],
            "companion_builds": companions, "first_new": res["first_new"][:12]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--image", default=IMAGE)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows: dict[str, list[dict]] = {"without": [], "with": [], "again": []}
    with tempfile.TemporaryDirectory() as tmp:
        torch, shas, comp = make_companion_repos(Path(tmp) / "repos")
        spec = f"git+{comp}@v1.0{WITH_BUILD}"
        for r in range(args.repeat):
            runs = {"without": (Path(tmp) / f"without-{r}", (), PLAIN_TEST),
                    "with": (Path(tmp) / f"with-{r}", ("--with", spec), TEST)}
            for name, (work, extra, test) in runs.items():
                rows[name].append(bisect(torch, shas, work, args.image, *extra, test=test))
                print(json.dumps({"run": name, **rows[name][-1]}), flush=True)
            again = bisect(torch, shas, runs["with"][0], args.image, "--with", spec,
                           test="true && " + TEST)
            rows["again"].append(again)
            print(json.dumps({"run": "again", **again}), flush=True)
    print(f"{'run':<8} {'wall s':>8} {'probes':>7} {'torch builds':>13} {'companion builds':>17}")
    for name, found in rows.items():
        med = {k: statistics.median(r[k] for r in found)
               for k in ("wall_s", "probes", "torch_builds", "companion_builds")}
        print(f"{name:<8} {med['wall_s']:>8.1f} {med['probes']:>7.0f} {med['torch_builds']:>13.0f} "
              f"{med['companion_builds']:>17.0f}")


if __name__ == "__main__":
    main()
