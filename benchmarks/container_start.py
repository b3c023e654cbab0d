"""What entering the image costs a probe, per container runtime; and the image import.

    python -m benchmarks.container_start [--image IMAGE] [--repeat 7] [--bring-up SRC_DIR]

Needs scripts/docker-up.sh, scripts/slurm-up.sh and scripts/enroot-pyxis-up.sh. Each row
runs `true` in the image the way a probe job does, `--repeat` times, and quotes the
median: docker (`docker run --rm`), enroot straight from the squashfs (squashfuse, what
the job scripts do where squashfuse is installed), enroot with a container of its own
(create + start + remove, the fallback), pyxis (`srun --container-image=SQSH`, with the
cluster's use_squashfuse=1) against a bare `srun true`. Then `enroot import` of the image
from the Docker engine, cold, and the cached path (the squashfs exists: a file test).
With --bring-up, times scripts/enroot-pyxis-up.sh from nothing (stop, sources removed).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

IMAGE = "bisect-ngc-test/debian-build:bookworm-git"


def timed(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.monotonic()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.monotonic() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", default=IMAGE)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--bring-up", metavar="SRC_DIR", default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bisect-ngc-start-"))
    sqsh = root / "image.sqsh"
    try:
        start = time.monotonic()
        subprocess.run(["enroot", "import", "-o", str(sqsh), f"dockerd://{args.image}"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cold = time.monotonic() - start
        cached = timed(["test", "-f", str(sqsh)], args.repeat)
        name = "bisect-ngc-bench"
        rows = [
            ("docker run --rm", timed(["docker", "run", "--rm", args.image, "true"],
                                      args.repeat)),
            ("enroot start, straight from the squashfs",
             timed(["enroot", "start", "--rw", str(sqsh), "true"], args.repeat)),
            ("enroot create + start + remove",
             timed(["bash", "-c", 'enroot create --force --name "$1" "$2" && '
                    'enroot start --rw "$1" true; enroot remove --force "$1"', "_", name,
                    str(sqsh)], args.repeat)),
            ("srun (bare, no container)", timed(["srun", "--ntasks=1", "true"], args.repeat)),
            ("srun --container-image (pyxis, use_squashfuse=1)",
             timed(["srun", "--ntasks=1", f"--container-image={sqsh}", "true"], args.repeat)),
        ]
        size = sqsh.stat().st_size / 1e6
        print(f"image {args.image}: squashfs {size:.0f} MB; medians of {args.repeat}\n")
        print("| how a probe enters the image | seconds (median) |")
        print("|---|---:|")
        for label, secs in rows:
            print(f"| {label} | {secs:.2f} |")
        print(f"\n| import | seconds |\n|---|---:|\n| `enroot import dockerd://`, cold | "
              f"{cold:.1f} |\n| cached (the squashfs exists) | {cached:.3f} |")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.bring_up:
        up = Path(__file__).resolve().parents[1] / "scripts" / "enroot-pyxis-up.sh"
        subprocess.run(["bash", str(up), "stop"], check=True, stderr=subprocess.DEVNULL)
        shutil.rmtree(os.environ.get("ENROOT_PYXIS_BUILD", "/var/tmp/bisect-ngc-enroot-pyxis"),
                      ignore_errors=True)
        start = time.monotonic()
        subprocess.run(["bash", str(up), args.bring_up], check=True, stderr=subprocess.DEVNULL)
        print(f"\nscripts/enroot-pyxis-up.sh from nothing (packages already installed): "
              f"{time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
