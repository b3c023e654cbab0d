"""The Docker engine the tests use (scripts/docker-up.sh starts one and builds the test
image): whether it is there (PROBLEM says why not), its client, and images committed from
a script run in a container."""
from __future__ import annotations

import os
import time



IMAGE = os.environ.get("BISECT_NGC_TEST_IMAGE", "bisect-ngc-test/debian-build:bookworm-git")


def _engine_problem() -> str | None:
    try:
        import docker
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:  # noqa: BLE001
        return f"no Docker engine reachable ({exc.__class__.__name__}); run scripts/docker-up.sh"
    try:
        client.images.get(IMAGE)
    except Exception:  # noqa: BLE001
        return f"test image {IMAGE} is missing; run scripts/docker-up.sh"
    return None


PROBLEM = _engine_problem()


def docker_client():
    import docker
    return docker.from_env()


def docker_errors():
    import docker.errors
    return docker.errors


def commit_image(base: str, script: str, repository: str, tag: str, *,
                 volumes: list[str] | None = None, changes: list[str] | None = None) -> None:
    """A new image: `script` run in a container of `base`, committed as repository:tag."""
    box = docker_client().containers.create(base, ["/bin/sh", "-c", script],
                                            volumes=volumes or [])
    try:
        box.start()
        assert box.wait()["StatusCode"] == 0, box.logs().decode()
        box.commit(repository=repository, tag=tag, changes=changes or [])
    finally:
        box.remove(force=True)


def containers(label: str) -> list:
    """The containers with this label. The SDK inspects each one it lists: one removed in
    between (a probe ending) is listed again."""
    for _ in range(20):
        try:
            return docker_client().containers.list(all=True, filters={"label": label})
        except docker_errors().NotFound:
            time.sleep(0.05)
    return docker_client().containers.list(all=True, filters={"label": label})
