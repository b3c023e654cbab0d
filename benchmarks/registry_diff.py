"""`bisect-ngc diff` and `releases --refresh` against the local registry
(scripts/registry-up.sh, the Docker engine to push): two tags in NGC's layout, diffed cold
(manifests and configs read) and cached (manifests only); then 24 release tags refreshed
into a fresh overlay; each timed in this process. The issue's goals: a diff under 2 s cold
and 0.2 s cached, a refresh of 24 tags under 10 s. With --bearer, the diff reads the same
tags through the registry that asks for bearer tokens (127.0.0.1:5001, as nvcr.io does),
its token service served in this process (tests/lib/token_server.py).
    python -m benchmarks.registry_diff [--repeats N] [--bearer]"""
from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bisect_ngc.images.image_config import diff  # noqa: E402
from bisect_ngc.images.registry import Registry  # noqa: E402
from tests.lib import token_server  # noqa: E402
from tests.lib.registry_images import HOST, login, push, registry_up  # noqa: E402

REFRESH_REPO = f"{HOST}/bisect-ngc-bench/pytorch"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--bearer", action="store_true", help="read through the token registry")
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
    if args.bearer:
        a, b = (x.replace(HOST, token_server.HOST) for x in (a, b))
        token_server.serve(token_server.TokenServer())
        config = json.loads((work / "docker" / "config.json").read_text())
        key = base64.b64encode(f"{token_server.USER}:{token_server.API_KEY}".encode()).decode()
        config["auths"][token_server.HOST] = {"auth": key}
        (work / "docker" / "config.json").write_text(json.dumps(config))
    cold, cached = [], []
    for k in range(args.repeats):
        cache = work / f"cache-{k}"
        for timings in (cold, cached):      # a fresh cache, then the same one again
            t = time.perf_counter()
            registry = Registry(cache)      # a new command: logs in again
            rows = diff(registry.config(a)[1], registry.config(b)[1])
            timings.append(time.perf_counter() - t)
        assert [r.name for r in rows] == ["cuda", "nccl"], rows
    how = " (bearer tokens)" if args.bearer else ""
    print(f"diff of two tags{how}, {args.repeats} repeats: cold median "
          f"{statistics.median(cold):.3f} s "
          f"(max {max(cold):.3f}), cached median {statistics.median(cached):.3f} s "
          f"(max {max(cached):.3f})")
    tags = [f"{y}.{m:02d}" for y in (24, 25) for m in range(1, 13)]
    for k, name in enumerate(tags):
        push(client, f"{name}-py3", {"PYTORCH_BUILD_VERSION": f"2.{k}.0a0+{k:07x}",
                                     "CUDA_VERSION": f"12.{k}.0.001"}, repo=REFRESH_REPO)
    from bisect_ngc.cli.main import main as cli
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = cli(["releases", "--refresh", "--repository", REFRESH_REPO, "--json",
                    "--cache-dir", str(work / "refresh")])
    took = time.perf_counter() - t
    assert code == 0
    print(f"releases --refresh of {len(tags)} tags, cold: {took:.2f} s")


if __name__ == "__main__":
    main()
