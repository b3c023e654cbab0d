"""Attribution's cost against the number of differing components:
python -m benchmarks.attribution [--sizes 8 32 128] [--docker]

For n differing components and one or two culprits (two: needed together), the swaps
that `bisect_ngc.attribution` asks for, median and maximum over every placement of the
culprit (one) or 200 random pairs (two), including the first all-components swap and
the reverse confirmation. With --docker (a running engine and the test image of
scripts/docker-up.sh), it also builds two images that differ in n generated Python
distributions and times `bisect-ngc components` end to end, with a cold cache
(inventory and extraction included) and again (every swap from the session file).
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bisect_ngc.attribution.search import Attribution, Side, Swap, next_swaps  # noqa: E402


def swaps_needed(names: list[str], culprits: set[str], suspects: list[str] = ()) -> int:
    seen: dict[Swap, Side] = {}
    while not isinstance(step := next_swaps(names, seen, suspects=suspects), Attribution):
        for swap in step:
            rest = set(names) - swap.components
            turned = culprits <= (swap.components if swap.into == "a" else rest)
            seen[swap] = Side.B if turned else Side.A
    assert set(step.culprits) == culprits, (step, culprits)
    return len(seen)


def simulate(sizes: list[int]) -> None:
    """Swaps per answer; "led": the culprits among 4 suspects (what the configs show
    moved, attribution.suspects), "misled": 4 suspects, none of them a culprit."""
    rng = random.Random(1)
    print("| components | culprits | swaps: median | max | 2⌈log2 n⌉ + 2 | led: median | "
          "misled: median |\n|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        names = [f"py:pkg{k:03d}" for k in range(n)]
        for k in (1, 2):
            sets = [{c} for c in names] if k == 1 else \
                [set(rng.sample(names, 2)) for _ in range(200)]
            counts, led, misled = [], [], []
            for culprits in sets:
                others = [c for c in names if c not in culprits]
                counts.append(swaps_needed(names, culprits))
                if n > 4 + k:
                    led.append(swaps_needed(names, culprits, sorted(culprits) + rng.sample(
                        others, 4 - k)))
                    misled.append(swaps_needed(names, culprits, rng.sample(others, 4)))
            bound = 2 * math.ceil(math.log2(n)) + 2
            med = lambda xs: f"{statistics.median(xs):g}" if xs else "-"     # noqa: E731
            print(f"| {n} | {k} | {med(counts)} | {max(counts)} | {bound} | {med(led)} | "
                  f"{med(misled)} |")


def docker_images(n: int, tmp: Path) -> tuple[str, str]:
    from tests.test_components import wheel
    from tests.test_docker_backend import IMAGE, commit_image
    for side in ("a", "b"):
        wheels = tmp / f"w{n}{side}"
        wheels.mkdir()
        for k in range(n):
            wheel(wheels, f"pkg{k:03d}", "1.0" if side == "a" else "2.0",
                  {f"pkg{k:03d}/__init__.py": f"behaviour = {side!r}\n"})
        commit_image(IMAGE, "pip install -q --no-deps --no-index --break-system-packages "
                            "/w/*.whl", "bisect-ngc-bench/attribution", f"{n}{side}",
                     volumes=[f"{wheels}:/w:ro"])
    return (f"bisect-ngc-bench/attribution:{n}a", f"bisect-ngc-bench/attribution:{n}b")


def end_to_end(sizes: list[int]) -> None:
    print("\n| components | culprits | swaps | cold (s) | again (s) |\n|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for n in sizes:
            a, b = docker_images(n, tmp)
            for culprits in ([n // 3], [n // 3, n - 1]):
                test = "python3 -c \"import sys; " + "; ".join(
                    f"import pkg{k:03d}" for k in culprits) + "; sys.exit(" + " and ".join(
                    f"pkg{k:03d}.behaviour == 'b'" for k in culprits) + ")\""
                cache = tmp / f"cache{n}-{len(culprits)}"
                walls, res = [], {}
                for _ in range(2):
                    t0 = time.perf_counter()
                    out = subprocess.run([sys.executable, "-m", "bisect_ngc", "components",
                                          "--from", a, "--to", b, "--test", test, "--cache-dir",
                                          str(cache), "--json"], capture_output=True, text=True)
                    walls.append(time.perf_counter() - t0)
                    res = json.loads(out.stdout)
                assert sorted(res["attribution"]["culprits"]) == [f"py:pkg{k:03d}"
                                                                   for k in culprits], res
                print(f"| {n} | {len(culprits)} | {len(res['swaps'])} | {walls[0]:.1f} | "
                      f"{walls[1]:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 32, 128])
    ap.add_argument("--docker", action="store_true")
    args = ap.parse_args()
    simulate(args.sizes)
    if args.docker:
        end_to_end(args.sizes)


if __name__ == "__main__":
    main()
