"""Time to answer for the seed's question, by tier: a model on the pure search.

    python -m benchmarks.tiers_model [--commits 1321] [--nightlies 35] [--build-min 60]

The range of 24.09 -> 24.10 (1321 first-parent commits; the two endpoint images as they
are, ~35 nightlies in between) is bisected with the real search functions
(`next_in_subset` for the prebuilt tiers, then `next_step`) for every position of the
transition, serially and with --jobs 4, against today's build-every-probe. Durations:
an image probe and a nightly probe as measured (see BENCHMARKS.md), a build as a parameter.
"""
from __future__ import annotations

import argparse
import statistics

from bisect_ngc.core.search import Result, Verdict, next_in_subset, next_step


def bisect(n: int, t: int, tiers: list[list[int]], jobs: int) -> dict[str, int]:
    verdicts: dict[int, Verdict] = {}
    counts = {"image": 0, "nightly": 0, "build": 0, "build_rounds": 0, "image_rounds": 0,
              "nightly_rounds": 0}
    names = ["image", "nightly"]
    while True:
        for name, subset in zip(names, tiers):
            step = next_in_subset(n, verdicts, subset, jobs)
            if step is not None:
                break
        else:
            name, step = "build", next_step(n, verdicts, jobs)
            if isinstance(step, Result):
                assert step.first_new == t
                return counts
        counts[f"{name}_rounds"] += 1
        counts[name] += len(step.indices)
        for i in step.indices:
            verdicts[i] = Verdict.FAIL if i >= t else Verdict.PASS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", type=int, default=1321)
    ap.add_argument("--nightlies", type=int, default=35)
    ap.add_argument("--build-min", type=float, default=60.0, help="one source build")
    ap.add_argument("--image-s", type=float, default=13.0,
                    help="one image probe: container start + the repro (measured)")
    ap.add_argument("--nightly-s", type=float, default=75.0,
                    help="one nightly probe: download (~2.5 GB) + install + the repro; an "
                         "assumption, not measured here")
    args = ap.parse_args()
    n = args.commits + 1
    step = n / (args.nightlies + 1)
    nightly = sorted({round(step * (k + 1)) for k in range(args.nightlies)} - {0, n - 1})
    tiers = [[0, n - 1], nightly]
    print(f"{args.commits} commits, {len(nightly)} nightlies, build {args.build_min:g} min\n")
    print("| mode | jobs | builds (median / max) | rounds of builds (median / max) | "
          "prebuilt probes (median) | time to answer, h (median / max) |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, use in (("build every probe (today)", [[], []]), ("tiers", tiers)):
        for jobs in (1, 4):
            runs = [bisect(n, t, use, jobs) for t in range(1, n)]
            builds = [r["build"] for r in runs]
            brounds = [r["build_rounds"] for r in runs]
            prebuilt = [r["image"] + r["nightly"] for r in runs]
            hours = [(r["build_rounds"] * (args.build_min * 60 + args.image_s)
                      + r["image_rounds"] * args.image_s
                      + r["nightly_rounds"] * args.nightly_s) / 3600 for r in runs]
            print(f"| {label} | {jobs} | {statistics.median(builds):g} / {max(builds)} | "
                  f"{statistics.median(brounds):g} / {max(brounds)} | "
                  f"{statistics.median(prebuilt):g} | "
                  f"{statistics.median(hours):.1f} / {max(hours):.1f} |")


if __name__ == "__main__":
    main()
