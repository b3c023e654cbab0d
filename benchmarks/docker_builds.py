"""Docker backend benchmarks: python -m benchmarks.docker_builds

(a) cold vs warm build of a C-extension package (a fixed heavy.c plus a fastmod.c that
    changes at every commit) at neighbouring commits: cold = empty ccache and build tree,
    warm = the previous commit's ccache and per-slot build tree;
(b) per-probe container overhead: a no-op build and test in containers vs on the host.
Needs a Docker engine and the test image (scripts/docker-up.sh).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.lib.repos import CEXT_BUILD, make_cext_repo, make_repo  # noqa: E402

IMAGE = os.environ.get("BISECT_NGC_TEST_IMAGE", "bisect-ngc-test/debian-build:bookworm-git")


def probe(repo: Path, commit: str, tmp: Path, cache: Path, *extra: str) -> float:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "bisect_ngc", "probe", "--repo", str(repo),
                          "--commit", commit, "--state", str(tmp / "st"), "--cache-dir",
                          str(cache), *extra], capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise SystemExit(out.stdout + out.stderr)
    return time.perf_counter() - t0



def builds(tmp: Path, heavy: int, pairs: int) -> None:
    repo = tmp / "cext"
    shas = make_cext_repo(repo, 2 * pairs + 2, 1_000, heavy=heavy)
    docker = ["--backend", "docker", "--image", IMAGE, "--build", CEXT_BUILD,
              "--test", "true", "--build-tree"]
    ratios, colds, warms = [], [], []
    for i in range(pairs):
        cache = tmp / f"cache{i}"
        a, b = shas[2 * i + 1], shas[2 * i + 2]
        cold = probe(repo, a, tmp, cache, *docker)
        warm = probe(repo, b, tmp, cache, *docker)
        colds.append(cold)
        warms.append(warm)
        ratios.append(cold / warm)
    print(f"\n(a) {heavy}-function heavy.c, {pairs} neighbouring pairs, whole `probe` wall "
          "(build container + test container)\n")
    print("| | median (s) |\n|---|---:|")
    print(f"| cold build (empty ccache and build tree) | {statistics.median(colds):.2f} |")
    print(f"| warm build (neighbouring commit) | {statistics.median(warms):.2f} |")
    print(f"| cold / warm | {statistics.median(ratios):.2f}x |")


def overhead(tmp: Path, n: int) -> None:
    repo = tmp / "noop"
    shas = make_repo(repo, n, n // 2)
    test = 'test "$(cat behaviour)" = old'
    walls = {"local": [], "docker": []}
    for i in range(1, n):
        walls["local"].append(probe(repo, shas[i], tmp, tmp / "c-local", "--build", "true",
                                    "--test", test))
        walls["docker"].append(probe(repo, shas[i], tmp, tmp / "c-docker", "--backend",
                                     "docker", "--image", IMAGE, "--build", "true",
                                     "--test", test))
    loc, dock = statistics.median(walls["local"]), statistics.median(walls["docker"])
    print(f"\n(b) per-probe wall of `bisect-ngc probe` with a no-op build and test, median of "
          f"{n - 1}\n")
    print("| backend | wall (s) |\n|---|---:|")
    print(f"| local | {loc:.2f} |\n| docker (build + test container) | {dock:.2f} |")
    print(f"\ncontainer overhead per probe: {dock - loc:.2f} s")


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        builds(tmp, heavy=4000, pairs=3)
        overhead(tmp, 6)


if __name__ == "__main__":
    main()
