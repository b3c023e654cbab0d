"""Builds per answer with and without overlay probes.

    python -m benchmarks.overlays real   [--commits 1000] [--python-only 0.4] [--answers 5]
    python -m benchmarks.overlays model  [--commits 1321] [--python-only 0.4] [--build-min 60]
    python -m benchmarks.overlays repack [WHEEL]

real: a generated compiled package (tests.lib.repos.make_mixed_repo) whose commits are
      Python-only at the given rate, bisected by the Docker backend on the real engine for
      several transitions, with and without overlays; counts builds and overlay probes.
      Needs scripts/docker-up.sh.
model: the seed's range (24.09 -> 24.10: 1321 first-parent commits) with the real search
      (`next_step` with its cheap indices) and a model of the overlay rule: a commit can be
      overlaid on a built one when every commit between them is Python-only (reach 8, as
      in wheel_overlay.Overlays). Every position of the transition; time = builds x
      --build-min + overlay probes x --overlay-min.
repack: times wheel_overlay.overlay_wheel on a real torch wheel (the CPU build on this disk
      by default): what an overlay costs before its test.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from bisect_ngc.prebuilt.overlay import OVERLAY_COST
from bisect_ngc.core.search import Result, Verdict, next_in_subset, next_step, open_interval

REACH = 8


def python_only_flags(n: int, rate: float, seed: int) -> list[bool]:
    rng = random.Random(seed)
    return [False] + [rng.random() < rate for _ in range(n - 1)]


def model_bisect(n: int, t: int, py: list[bool], jobs: int, overlays: bool, build_min: float,
                 overlay_min: float, tiers: list[tuple[list[int], float]] = ()
                 ) -> tuple[int, int, int, float]:
    """(builds, overlay probes, rounds, minutes) for one transition at t. A round lasts
    as long as its slowest probe. `tiers`: prebuilt (subset, minutes a probe) searched
    first, as the engine does."""
    # bad[i]: commits 1..i that are not Python-only; a diff a..b is Python-only when none
    # lies in (min, max].
    bad = [0]
    for flag in py[1:]:
        bad.append(bad[-1] + (not flag))
    verdicts: dict[int, Verdict] = {}
    built: set[int] = set()
    builds = overlaid = rounds = 0
    minutes = 0.0
    while True:
        pre = next(((step, mins) for subset, mins in tiers
                    if (step := next_in_subset(n, verdicts, subset, jobs)) is not None), None)
        if pre is not None:
            rounds += 1
            minutes += pre[1]
            verdicts.update({i: Verdict.FAIL if i >= t else Verdict.PASS for i in pre[0].indices})
            continue
        cheap: dict[int, float] = {}
        if overlays and 0 in verdicts and n - 1 in verdicts:
            lo, hi = open_interval(n, verdicts)
            for b in built:
                for c in range(max(lo + 1, b - REACH), min(hi, b + REACH + 1)):
                    if c not in verdicts and bad[max(b, c)] == bad[min(b, c)]:
                        cheap[c] = OVERLAY_COST
        step = next_step(n, verdicts, jobs, cheap=cheap)
        if isinstance(step, Result):
            assert step.first_new == t
            return builds, overlaid, rounds, minutes
        rounds += 1
        minutes += max(overlay_min if i in cheap else build_min for i in step.indices)
        for i in step.indices:
            if i in cheap:
                overlaid += 1
            else:
                builds += 1
                built.add(i)
            verdicts[i] = Verdict.FAIL if i >= t else Verdict.PASS


def model(args: argparse.Namespace) -> None:
    n = args.commits + 1
    py = python_only_flags(n, args.python_only, args.seed)
    print(f"seed range: {n - 1} commits, {sum(py) / (n - 1):.0%} Python-only; build "
          f"{args.build_min:g} min, overlay probe {args.overlay_min:g} min; every position "
          "of the transition\n")
    print("| mode | jobs | builds (median / max) | overlay probes (median) | rounds (median) "
          "| time to answer, h (median / max) |")
    print("|---|---:|---:|---:|---:|---:|")
    step = n / (args.nightlies + 1)
    nightly = sorted({round(step * (k + 1)) for k in range(args.nightlies)} - {0, n - 1})
    tiers = [([0, n - 1], args.image_s / 60), (nightly, args.nightly_s / 60)]
    for label, use, overlays in (("--no-overlay", [], False), ("overlays", [], True),
                                 ("tiers, --no-overlay", tiers, False),
                                 ("tiers + overlays", tiers, True)):
        for jobs in (1, 4):
            rows = [model_bisect(n, t, py, jobs, overlays, args.build_min, args.overlay_min,
                                 use) for t in range(1, n)]
            col = lambda k: [r[k] for r in rows]
            hours = [m / 60 for m in col(3)]
            print(f"| {label} | {jobs} | "
                  f"{statistics.median(col(0)):g} / {max(col(0))} | "
                  f"{statistics.median(col(1)):g} | {statistics.median(col(2)):g} | "
                  f"{statistics.median(hours):.1f} / {max(hours):.1f} |")


def real(args: argparse.Namespace) -> None:
    from tests.lib.repos import MIXED_BUILD, MIXED_RULE, MIXED_TEST, make_mixed_repo
    image = "bisect-ngc-test/debian-build:bookworm-git"
    rng = random.Random(args.seed)
    n = args.commits
    py = python_only_flags(n, args.python_only, args.seed)
    picks = sorted(rng.sample([i for i in range(n // 10, n - n // 10) if py[i]], args.answers))
    print(f"{n} commits, {sum(py) / n:.0%} Python-only; transitions at {picks}")
    rows = {False: [], True: []}
    for t in picks:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            shas = make_mixed_repo(tmp / "r", n, t, {i for i in range(n) if py[i]})
            for overlays in (False, True):
                run = tmp / ("on" if overlays else "off")
                argv = [sys.executable, "-m", "bisect_ngc", "bisect", "--repo", str(tmp / "r"),
                        "--old", shas[0], "--new", shas[-1], "--backend", "docker",
                        "--image", image, "--build", MIXED_BUILD, "--test", MIXED_TEST,
                        *(f"--overlay-rule={r}" for r in MIXED_RULE),
                        *([] if overlays else ["--no-overlay"]), "--jobs", str(args.jobs),
                        "--state", str(run / "st"), "--cache-dir", str(run / "cache"),
                        "--quiet", "--json"]
                start = time.monotonic()
                out = subprocess.run(argv, capture_output=True, text=True)
                res = json.loads(out.stdout)
                assert res["first_new"] == shas[t], out.stderr
                rows[overlays].append((res["builds"], res["overlays"], res["probes"],
                                       time.monotonic() - start))
                print(f"  t={t} overlays={'on' if overlays else 'off'}: {res['builds']} builds, "
                      f"{res['overlays']} overlays, {res['probes']} probes, "
                      f"{rows[overlays][-1][3]:.0f} s", flush=True)
    print("\n| mode | builds per answer (median / max) | overlay probes (median) | probes (median) "
          "| wall s (median) |")
    print("|---|---:|---:|---:|---:|")
    for overlays in (False, True):
        r = rows[overlays]
        print(f"| {'overlays' if overlays else '--no-overlay'} | "
              f"{statistics.median(x[0] for x in r):g} / {max(x[0] for x in r)} | "
              f"{statistics.median(x[1] for x in r):g} | {statistics.median(x[2] for x in r):g} "
              f"| {statistics.median(x[3] for x in r):.0f} |")


def repack(args: argparse.Namespace) -> None:
    from bisect_ngc.prebuilt.wheel_overlay import overlay_wheel
    wheel = Path(args.wheel)
    with zipfile.ZipFile(wheel) as z:
        names = [i.filename for i in z.infolist()]
        size = sum(i.file_size for i in z.infolist())
        target = "torch/nn/modules/linear.py"
        original = z.read(target)
    print(f"{wheel.name}: {wheel.stat().st_size / 1e6:.0f} MB, {size / 1e6:.0f} MB unpacked, "
          f"{len(names)} files")
    times = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.monotonic()
            overlay_wheel(wheel, Path(tmp) / wheel.name,
                          replace={target: original + b"\n# overlaid\n"}, delete=(),
                          original=lambda p: original)
            times.append(time.monotonic() - start)
    print(f"overlay_wheel, one file replaced: median {statistics.median(times):.1f} s over "
          f"{len(times)} runs ({size / 1e6 / statistics.median(times):.0f} MB/s unpacked)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    m = sub.add_parser("model")
    m.add_argument("--commits", type=int, default=1321)
    m.add_argument("--python-only", type=float, default=0.4)
    m.add_argument("--build-min", type=float, default=60.0)
    m.add_argument("--overlay-min", type=float, default=2.0,
                   help="one overlay probe: repack (see `repack`) + install + the repro")
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--nightlies", type=int, default=35,
                   help="tiers rows: nightlies evenly spaced in the range (benchmarks.tiers_model)")
    m.add_argument("--image-s", type=float, default=13.0)
    m.add_argument("--nightly-s", type=float, default=75.0)
    r = sub.add_parser("real")
    r.add_argument("--commits", type=int, default=1000)
    r.add_argument("--python-only", type=float, default=0.4)
    r.add_argument("--answers", type=int, default=5)
    r.add_argument("--jobs", type=int, default=1)
    r.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("repack")
    p.add_argument("wheel", nargs="?",
                   default="/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    p.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    {"model": model, "real": real, "repack": repack}[args.what](args)


if __name__ == "__main__":
    main()
