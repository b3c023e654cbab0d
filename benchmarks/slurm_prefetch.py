"""The next round on Slurm with and without its image imported ahead, on the single-node
cluster of scripts/slurm-up.sh with enroot (scripts/enroot-pyxis-up.sh):
python -m benchmarks.slurm_prefetch [--round-s 30] [--repeat 3]

Each trial removes the test image's squashfs from a fresh shared directory. "This round"
is ROUND_S seconds of work; "the next round" is one test-only job in the image (the swap
jobs' template, as an image probe or a swap runs). Without the prefetch that job imports
the image itself; with it, `prefetch` submitted the import job when this round began.
Printed: the next round's wall time each way, and the import's own time."""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

IMAGE = "bisect-ngc-test/debian-build:bookworm-git"


def backend(shared: Path, repo: Path):
    from bisect_ngc.backends.slurm.backend import SlurmBackend, SlurmSettings
    from bisect_ngc.core.artifacts import ArtifactStore
    from bisect_ngc.core.recipes import Recipe
    from bisect_ngc.core.store import Store
    from bisect_ngc.vcs.history import History
    from bisect_ngc.vcs.worktrees import Worktrees
    settings = SlurmSettings(runtime="enroot", image=IMAGE, container_import="dockerd",
                             shared_dir=shared, partition="cpu", gpu_partition="cpu",
                             gpus_per_probe=0, poll_min=0.2, poll_max=1.0)
    b = SlurmBackend(Worktrees(History.open(str(repo), shared), shared / "wt"),
                     Recipe(build=None, test="true", image=IMAGE), settings=settings,
                     store=Store(shared / "st"), artifacts=ArtifactStore(shared / "artifacts"))
    b.session = "bench"
    return b


def next_round(b) -> float:
    start = time.monotonic()
    code, _ = b.containers().output(IMAGE, "true", {}, [])
    assert code == 0, "the job in the image failed"
    return time.monotonic() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--round-s", type=float, default=30.0, help="this round's work, seconds")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from tests.lib.repos import make_repo
    work = Path(tempfile.mkdtemp(prefix="slurm-prefetch-"))
    make_repo(work / "repo", 4, 2)
    without, with_, imports = [], [], []
    for k in range(args.repeat):
        b = backend(work / f"without-{k}", work / "repo")
        time.sleep(args.round_s)                        # this round
        without.append(next_round(b))
        b = backend(work / f"with-{k}", work / "repo")
        _, sqsh, _ = b.images.locate(IMAGE)
        start = time.monotonic()
        b.prefetch([IMAGE])                             # as this round begins
        while not sqsh.exists() and time.monotonic() - start < args.round_s:
            time.sleep(0.2)
        imports.append(time.monotonic() - start if sqsh.exists() else float("nan"))
        time.sleep(max(0.0, args.round_s - (time.monotonic() - start)))
        with_.append(next_round(b))
        print(f"trial {k + 1}: next round {without[-1]:.1f} s without, {with_[-1]:.1f} s with "
              f"(import ahead took {imports[-1]:.1f} s of this round's {args.round_s:g} s)")
    print(f"median next round: {statistics.median(without):.1f} s without the prefetch, "
          f"{statistics.median(with_):.1f} s with it; import {statistics.median(imports):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
