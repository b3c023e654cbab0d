"""The Docker backend's prefetch (issue 34, item 4) against the real engine and the local
registry of scripts/registry-up.sh: an image pushed there and removed from the engine is
pulled in the background, and a probe that needs it waits for that pull instead of
starting its own; an image that cannot be pulled is left for its probe to report."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from tests.lib.registry_images import HOST, docker_or_skip, login, push, registry_up

pytestmark = [pytest.mark.registry, pytest.mark.docker]


@pytest.fixture
def client(tmp_path, monkeypatch):
    if not registry_up():
        pytest.skip(f"no registry on {HOST}: run scripts/registry-up.sh (CI does)")
    c = docker_or_skip()
    login(tmp_path / "docker")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))   # the pull's login
    return c


def test_a_prefetched_image_is_pulled_in_the_background_and_a_probe_waits_for_it(client):
    from docker.errors import ImageNotFound
    from bisect_ngc.backends.docker.engine import Prefetch, ensure_image
    ref = push(client, "prefetch-1", {"PYTORCH_BUILD_VERSION": "2.5.0a0+b465a5843b"},
               repo=f"{HOST}/bisect-ngc-test/prefetch")
    missing = f"{HOST}/bisect-ngc-test/prefetch:no-such-tag"
    client.images.remove(ref, force=True)
    with pytest.raises(ImageNotFound):
        client.images.get(ref)
    said: list[str] = []
    prefetch = Prefetch(lambda: client)
    prefetch.start([missing, ref])
    deadline = time.time() + 60
    while (ref not in prefetch.done or missing not in prefetch.done) and time.time() < deadline:
        time.sleep(0.1)
    assert prefetch.done == {missing: False, ref: True}    # a failure is only noted
    assert prefetch.wait_for(ref) is True and client.images.get(ref)
    assert prefetch.wait_for(ref) is False                 # said once, not at every probe
    assert prefetch.wait_for(missing) is False             # its probe pulls and says why
    ensure_image(client, ref, said.append)
    assert said == []                                      # no second pull
    prefetch.stop()
    client.images.remove(ref, force=True)


def test_a_probe_never_waits_behind_a_pull_it_does_not_need(client):
    """A new list replaces the pulls not started; an image the probe needs that is still
    queued is taken off the queue for the probe to pull itself."""
    from bisect_ngc.backends.docker.engine import Prefetch
    gate = threading.Event()
    pulled: list[str] = []

    class Slow(Prefetch):
        def _work(self):            # the real worker, but each pull waits for the gate
            import bisect_ngc.backends.docker.engine as engine
            real = engine.ensure_image
            engine.ensure_image = lambda c, r, say: (gate.wait(10), pulled.append(r))
            try:
                super()._work()
            finally:
                engine.ensure_image = real
    prefetch = Slow(lambda: client)
    prefetch.start(["img-a", "img-b", "img-c"])
    time.sleep(0.2)                                        # img-a is being pulled
    prefetch.start(["img-c", "img-d"])                     # img-b is no longer likely
    assert prefetch.pulling == "img-a" and prefetch.queue == ["img-c", "img-d"]
    t0 = time.time()
    assert prefetch.wait_for("img-d") is False and time.time() - t0 < 1   # not started
    assert prefetch.queue == ["img-c"]
    gate.set()
    assert prefetch.wait_for("img-a") is True
    prefetch.stop()
    assert "img-b" not in pulled and "img-d" not in pulled


def test_a_pull_under_way_never_keeps_the_process_from_exiting(tmp_path):
    """The worker is a daemon: an interpreter that is done exits while it pulls."""
    script = tmp_path / "exit.py"
    script.write_text(
        "import time, bisect_ngc.backends.docker.engine as e\n"
        "e.ensure_image = lambda c, r, say: time.sleep(60)\n"
        "p = e.Prefetch(lambda: None)\n"
        "p.start(['img'])\n"
        "time.sleep(0.3)\n")
    t0 = time.time()
    subprocess.run([sys.executable, str(script)], check=True, timeout=30)
    assert time.time() - t0 < 10
