"""Checkouts on a PyTorch-shaped repository: per probe, per slot on disk, and offline.

    python -m benchmarks.checkouts [--commits 2000] [--files 20000] [--submodules 30]

Generates the repository (tests.lib.repos.make_pytorch_shaped_repo: 20k files, 30
submodules as local bare repositories, 2000 first-parent commits moving a submodule
pointer every 25) and puts two slots through the commits a bisection of it probes (the
transition two thirds in, 12 commits), twice:

  before  `git submodule update --init --recursive --force` against the remotes at every
          checkout (each slot keeps its own submodule objects);
  after   the shared cache (bisect_ngc.vcs.submodules): one mirror per submodule URL, slots
          clone it with --shared and check out offline.

Quotes the median checkout after each slot's first, and the disk each slot and the shared
mirrors take (`du`, hardlinks counted once). Then the remotes are moved away and the
`after` slots go through the commits again.
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

from bisect_ngc.vcs.history import History
from bisect_ngc.vcs.worktrees import Worktrees
from bisect_ngc.core.search import Result, Verdict, next_step
from bisect_ngc.vcs.submodules import SubmoduleCache

from tests.lib.repos import make_pytorch_shaped_repo


def du_kib(*paths: Path) -> int:
    out = subprocess.run(["du", "-sk", "-c", *map(str, paths)], capture_output=True,
                         text=True).stdout.splitlines()
    return int(out[-1].split()[0]) if out else 0


def probe_order(n: int, t: int) -> list[int]:
    verdicts: dict[int, Verdict] = {}
    order = []
    while not isinstance(step := next_step(n, verdicts), Result):
        for i in step.indices:
            order.append(i)
            verdicts[i] = Verdict.FAIL if i >= t else Verdict.PASS
    return order


def run(tmp: Path, shas: list[str], order: list[int], cache: bool) -> tuple[list[float], Worktrees]:
    history = History.open(str(tmp / "pytorch"), tmp / "cache")
    name = "after" if cache else "before"
    wt = Worktrees(history, tmp / name, SubmoduleCache(tmp / "cache" / "subs") if cache else None)
    times = []
    for k, i in enumerate(order):
        start = time.monotonic()
        wt.checkout(k % 2, shas[i])
        times.append(time.monotonic() - start)
    return times, wt


def main() -> None:
    # The submodules here are local paths, which `git submodule update` refuses since git
    # 2.38 unless allowed (the cache path clones its own mirrors and needs no such leave).
    os.environ.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="protocol.file.allow",
                      GIT_CONFIG_VALUE_0="always")
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", type=int, default=2000)
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--submodules", type=int, default=30)
    ap.add_argument("--sub-files", type=int, default=200, help="files per submodule")
    ap.add_argument("--sub-bytes", type=int, default=4096, help="bytes per submodule file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        start = time.monotonic()
        made = make_pytorch_shaped_repo(tmp / "pytorch", commits=args.commits, files=args.files,
                                        submodules=args.submodules, sub_files=args.sub_files,
                                        sub_bytes=args.sub_bytes)
        shas = made["shas"]
        print(f"generated: {len(shas)} commits, "
              f"{len(subprocess.run(['git', 'ls-files'], cwd=tmp / 'pytorch', capture_output=True, text=True).stdout.splitlines())} "
              f"files, {len(made['subs'])} submodules in {time.monotonic() - start:.1f} s")
        order = probe_order(len(shas), len(shas) * 2 // 3)
        rows = []
        for cache in (False, True):
            times, wt = run(tmp, shas, order, cache)
            later = times[2:]        # each slot's first checkout makes the slot
            slot_dirs = [wt.path(0), wt.path(1)]
            modules = [wt.admin_dir(p) / "modules" for p in slot_dirs]
            per_slot = [du_kib(p, m) if m.exists() else du_kib(p)
                        for p, m in zip(slot_dirs, modules)]
            # Submodule objects each slot keeps for itself.
            own = [du_kib(m) if m.exists() else
                   du_kib(*(p / s / ".git" / "objects" for s in made["subs"]))
                   for p, m in zip(slot_dirs, modules)]
            shared = du_kib(tmp / "cache" / "subs") if cache else 0
            rows.append(("after (shared cache)" if cache else "before (submodule update)",
                         times[0], statistics.median(later), max(later), per_slot, own, shared))
        print(f"\n{len(order)} checkouts on 2 slots, in the order a bisection probes them\n")
        print("| submodules | first checkout s | later checkouts s (median / max) | disk per "
              "slot MiB | of which submodule objects MiB | shared mirrors MiB |")
        print("|---|---:|---:|---:|---:|---:|")
        for label, first, med, worst, per_slot, own, shared in rows:
            print(f"| {label} | {first:.2f} | {med:.2f} / {worst:.2f} | "
                  f"{' + '.join(f'{k / 1024:.0f}' for k in per_slot)} | "
                  f"{' + '.join(f'{k / 1024:.1f}' for k in own)} | {shared / 1024:.1f} |")
        shutil.move(tmp / "pytorch-remotes", tmp / "moved-away")
        times, _ = run(tmp, shas, list(reversed(order)), True)
        print(f"\nremotes moved away, the same commits again with the cache: median "
              f"{statistics.median(times):.2f} s, all {len(times)} checked out")


if __name__ == "__main__":
    main()
