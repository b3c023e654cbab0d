"""Release-mode rounds with and without the image prefetch, on the real Docker engine:
python -m benchmarks.prefetch [--mb 150] [--test-s 3] [--repeat 2]

Five release images (the test image of scripts/docker-up.sh plus a layer of MB random
megabytes each, and NGC's PYTORCH_BUILD_VERSION naming a commit of a generated
history) are pushed to the local registry of scripts/registry-up.sh, and the catalog
learns them with `releases --refresh --repository`. Each run removes them from the engine
and bisects 90.01 .. 90.05 in release mode (the test sleeps TEST_S seconds, as a real
repro takes its time), in-process, once with the prefetch and once with the backend's
prefetch switched off. Printed: per run, the wall time of each round of images (from
its probes' start and end) and of the whole session.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = "127.0.0.1:5000/bisect-ngc-bench/prefetch"
RELEASES = {"90.01": 10, "90.02": 40, "90.03": 60, "90.04": 90, "90.05": 110}


def images(client, shas: list[str], mb: int) -> list[str]:
    from tests.lib.registry_images import PASSWORD, USER
    from tests.test_docker_backend import IMAGE, commit_image
    refs = []
    for name, at in RELEASES.items():
        commit_image(IMAGE, f"head -c {mb}M /dev/urandom > /blob-{name}; "
                            f"echo {name} > /etc/base-marker", REPO, f"{name}-py3",
                     changes=[f"ENV PYTORCH_BUILD_VERSION=2.9.0a0+{shas[at][:10]}",
                              f"ENV NVIDIA_PYTORCH_VERSION={name}"])
        out = client.images.push(REPO, tag=f"{name}-py3",
                                 auth_config={"username": USER, "password": PASSWORD})
        if '"error"' in out:
            raise RuntimeError(out)
        refs.append(f"{REPO}:{name}-py3")
    return refs


def bisect(args: list[str], prefetch: bool) -> dict:
    from click.testing import CliRunner
    from bisect_ngc.backends.docker.backend import DockerBackend
    from bisect_ngc.cli.main import cli
    saved = DockerBackend.prefetch
    if not prefetch:
        DockerBackend.prefetch = (                                   # type: ignore[method-assign]
            lambda self, images, done=False: None)
    try:
        res = CliRunner().invoke(cli, args, catch_exceptions=False)
    finally:
        DockerBackend.prefetch = saved                          # type: ignore[method-assign]
    return json.loads(res.stdout)


def remove(client, refs: list[str]) -> None:
    from docker.errors import ImageNotFound
    for ref in refs:
        try:
            client.images.remove(ref, force=True)
        except ImageNotFound:
            pass                # not pulled by the last run (a release it never probed)


def rounds(state: Path, session: str) -> list[tuple[int, float]]:
    from bisect_ngc.core.store import Store
    by: dict[int, list] = {}
    for p in Store(state).probes(session):
        if p.details.get("tier") == "image":
            by.setdefault(p.round, []).append(p)
    return [(r, max(p.ended for p in ps) - min(p.started for p in ps))
            for r, ps in sorted(by.items())]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=150)
    ap.add_argument("--test-s", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    import docker
    from tests.lib.registry_images import login
    from tests.lib.repos import make_repo
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        login(tmp / "docker")
        import os
        os.environ["DOCKER_CONFIG"] = str(tmp / "docker")
        client = docker.from_env()
        shas = make_repo(tmp / "pytorch", 120, 70)
        refs = images(client, shas, args.mb)
        cache = tmp / "cache"
        from click.testing import CliRunner
        from bisect_ngc.cli.main import cli
        CliRunner().invoke(cli, ["releases", "--refresh", "--repository", REPO,
                                 "--cache-dir", str(cache)], catch_exceptions=False)
        test = f'sleep {args.test_s}; test "$(cat behaviour)" = old'
        print("| run | prefetch | image rounds, wall s each | rounds 2+ total s | session s |\n"
              "|---|---|---|---:|---:|")
        totals: dict[bool, list[float]] = {True: [], False: []}
        for k in range(args.repeat):
            for prefetch in (False, True):
                remove(client, refs)
                state = tmp / f"st-{k}-{prefetch}"
                t0 = time.perf_counter()
                res = bisect(["bisect", "--from", "90.01", "--to", "90.05", "--torch-repo",
                              str(tmp / "pytorch"), "--backend", "docker", "--build",
                              "true", "--test", test, "--no-nightlies", "--gpus", "none",
                              "--state", str(state), "--cache-dir", str(cache),
                              "--quiet", "--json"], prefetch)
                wall = time.perf_counter() - t0
                rs = rounds(state, res["session"])
                later = sum(w for r, w in rs[1:])
                totals[prefetch].append(later)
                print(f"| {k + 1} | {'on' if prefetch else 'off'} | "
                      f"{', '.join(f'{w:.1f}' for _, w in rs)} | {later:.1f} | {wall:.1f} |")
        print(f"\nmedian of the image rounds after the endpoints: off "
              f"{statistics.median(totals[False]):.1f} s, on {statistics.median(totals[True]):.1f} s")
        remove(client, refs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
