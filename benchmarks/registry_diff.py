"""`bisect-ngc diff` against the local registry (scripts/registry-up.sh, the Docker engine
to push): two tags in NGC's layout, diffed cold (manifests and configs read) and cached
(manifests only), each timed in this process. The issue's goals: under 2 s cold, under
0.2 s cached.
    python -m benchmarks.registry_diff [--repeats N]"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bisect_ngc.prebuilt.image_config import diff  # noqa: E402
from bisect_ngc.prebuilt.registry import Registry  # noqa: E402
from tests.lib.registry_images import login, push, registry_up  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    if not registry_up():
        sys.exit("no registry on 127.0.0.1:5000: run scripts/registry-up.sh")
    import docker
    client = docker.from_env()
    a = push(client, "bench-a", {"CUDA_VERSION": "12.6.1.006", "NCCL_VERSION": "2.22.3"})
    b = push(client, "bench-b", {"CUDA_VERSION": "12.6.2.004", "NCCL_VERSION": "2.23.4"})
    work = Path(tempfile.mkdtemp(prefix="registry-diff-"))
    login(work / "docker")
    os.environ["DOCKER_CONFIG"] = str(work / "docker")
    cold, cached = [], []
    for k in range(args.repeats):
        cache = work / f"cache-{k}"
        for timings in (cold, cached):      # a fresh cache, then the same one again
            t = time.perf_counter()
            registry = Registry(cache)      # a new command: logs in again
            rows = diff(registry.config(a)[1], registry.config(b)[1])
            timings.append(time.perf_counter() - t)
        assert [r.name for r in rows] == ["cuda", "nccl"], rows
    print(f"diff of two tags, {args.repeats} repeats: cold median {statistics.median(cold):.3f} s "
          f"(max {max(cold):.3f}), cached median {statistics.median(cached):.3f} s "
          f"(max {max(cached):.3f})")


if __name__ == "__main__":
    main()
