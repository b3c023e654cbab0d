"""Images in NGC's layout (its `*_VERSION` variables and `com.nvidia.*` labels on one tiny
layer), pushed to the local test registry of scripts/registry-up.sh: for the registry
tests and benchmarks/registry_diff.py."""
from __future__ import annotations

import base64
import io
import json
import re
import tarfile
from pathlib import Path

import requests

HOST = "127.0.0.1:5000"
USER, PASSWORD = "bisect", "ngc-test"
REPO = f"{HOST}/bisect-ngc-test/pytorch"


def registry_up() -> bool:
    try:
        return requests.get(f"http://{HOST}/v2/", timeout=5).status_code == 401
    except requests.RequestException:
        return False


def push(client, tag: str, env: dict[str, str], labels: dict[str, str] | None = None,
         repo: str = REPO) -> str:
    """Build repo:tag on one tiny layer with this environment and these labels, push it,
    and return its name."""
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as t:
        data = b"a layer that must never be fetched\n"
        info = tarfile.TarInfo("README")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    client.api.import_image_from_data(tar.getvalue(), repository="bisect-ngc-test/tiny", tag="1")
    lines = ["FROM bisect-ngc-test/tiny:1"] + [f"ENV {k}={v}" for k, v in env.items()] + \
        [f"LABEL {k}={v}" for k, v in (labels or {}).items()]
    client.images.build(fileobj=io.BytesIO("\n".join(lines).encode()), tag=f"{repo}:{tag}",
                        rm=True)
    out = client.images.push(repo, tag=tag, auth_config={"username": USER, "password": PASSWORD})
    if '"error"' in out:
        raise RuntimeError(out)
    return f"{repo}:{tag}"


def login(docker_config: Path, password: str = PASSWORD, user: str = USER,
          host: str = HOST) -> None:
    """A DOCKER_CONFIG directory with the login `docker login` would store."""
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    docker_config.mkdir(parents=True, exist_ok=True)
    (docker_config / "config.json").write_text(json.dumps({"auths": {host: {"auth": auth}}}))


def docker_or_skip():
    """The Docker engine's client, to build the test images; the test skips, saying why,
    where there is none."""
    import pytest
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine
        pytest.skip(f"no Docker engine to build the test images ({exc}): scripts/docker-up.sh")
    return client


def blobs_fetched(log: Path, since: int) -> list[str]:
    """The blobs a registry served after byte `since` of its access log (an
    unauthenticated try is a 401, not counted)."""
    with log.open() as f:
        f.seek(since)
        return re.findall(r'"GET /v2/[^ ]+/blobs/(sha256:[0-9a-f]{64}) HTTP/[0-9.]+" 200 ',
                          f.read())
