"""The Docker backend's prefetch (issue 34, item 4) against the real engine and the local
registry of scripts/registry-up.sh: an image pushed there and removed from the engine is
pulled in the background, and a probe that needs it waits for that pull instead of
starting its own; an image that cannot be pulled is left for its probe to report."""
from __future__ import annotations

import time

import pytest

from tests.lib.registry_images import HOST, login, push, registry_up

pytestmark = [pytest.mark.registry, pytest.mark.docker]


@pytest.fixture
def client(tmp_path, monkeypatch):
    if not registry_up():
        pytest.skip(f"no registry on {HOST}: run scripts/registry-up.sh (CI does)")
    docker = pytest.importorskip("docker")
    login(tmp_path / "docker")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))   # the pull's login
    try:
        c = docker.from_env()
        c.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine
        pytest.skip(f"no Docker engine ({exc}): scripts/docker-up.sh")
    return c


def test_a_prefetched_image_is_pulled_in_the_background_and_a_probe_waits_for_it(client):
    from docker.errors import ImageNotFound
    from bisect_ngc.backends.docker.engine import Prefetch, ensure_image
    ref = push(client, "prefetch-1", {"PYTORCH_BUILD_VERSION": "2.5.0a0+b465a5843b"},
               repo=f"{HOST}/bisect-ngc-test/prefetch")
    client.images.remove(ref, force=True)
    with pytest.raises(ImageNotFound):
        client.images.get(ref)
    said: list[str] = []
    prefetch = Prefetch(lambda: client)
    prefetch.start([ref, f"{HOST}/bisect-ngc-test/prefetch:no-such-tag"])
    prefetch.start([ref])                              # asked again: one pull
    assert len(prefetch.pulls) == 2
    prefetch.wait_for(ref)
    assert prefetch.pulls[ref].result() is True and client.images.get(ref)
    ensure_image(client, ref, said.append)
    assert said == []                                  # no second pull
    deadline = time.time() + 60
    missing = prefetch.pulls[f"{HOST}/bisect-ngc-test/prefetch:no-such-tag"]
    while not missing.done() and time.time() < deadline:
        time.sleep(0.2)
    assert missing.result() is False                   # forgotten: its probe will say why
    prefetch.stop()
    client.images.remove(ref, force=True)
