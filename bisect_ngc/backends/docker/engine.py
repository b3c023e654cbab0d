"""The Docker engine through the docker SDK, for what is not a probe: connecting, pulling
an image with progress (or in the background, ahead of the round that needs it), reading
an image's facts, and the Containers protocol that component swaps run on."""
from __future__ import annotations

import os
import time
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

import docker
from docker.errors import APIError, DockerException, ImageNotFound, NotFound

from ...attribution.components import ScriptsByShell
from ...errors import UserError
from ..base import last_json_line

LABEL = "bisect-ngc"


def ensure_image(client: docker.DockerClient, ref: str, say: Callable[[str], None], *,
                 pull: bool = True):
    """The image, pulled with progress if it is not here yet (or, without `pull`, a
    clear error that says how to get it)."""
    try:
        return client.images.get(ref)
    except ImageNotFound:
        if not pull:
            raise UserError(f"image {ref} is not on this Docker engine",
                            hint=f"docker pull {ref}") from None
    say(f"pulling {ref}")
    repo, _, tag = ref.rpartition(":") if ":" in ref.split("/")[-1] else (ref, "", "latest")
    layers: dict[str, str] = {}
    last = 0.0
    try:
        for event in client.api.pull(repo, tag=tag, stream=True, decode=True):
            if "error" in event:
                raise APIError(event["error"])
            if "id" in event and "status" in event:
                layers[event["id"]] = event["status"]
            if time.monotonic() - last > 5:
                last = time.monotonic()
                done = sum(s in ("Pull complete", "Already exists") for s in layers.values())
                say(f"  {ref}: {done}/{len(layers)} layers")
        return client.images.get(ref)
    except (APIError, NotFound, ImageNotFound) as exc:
        raise UserError(f"could not pull {ref}: {short_error(exc)}",
                        hint="for NGC images run `docker login nvcr.io` (user $oauthtoken, "
                             "password: your NGC API key); check the image name") from None


class Prefetch:
    """Images pulled on one background (daemon) thread while a round runs: the next
    round's likely ones. Each new list replaces the pulls not started yet; a probe never
    waits behind a pull it does not need (one of its image not started yet is its own
    to pull), and a pull that fails is left for the probe to report."""

    def __init__(self, client: Callable[[], docker.DockerClient]):
        self.client = client
        self.queue: list[str] = []
        self.pulling: str | None = None
        self.done: dict[str, bool] = {}      # pulled (True) or failed, not yet asked for
        self.asked: set[str] = set()
        self.cond = threading.Condition()
        self.stopped = False
        self.thread: threading.Thread | None = None

    def start(self, refs: Sequence[str]) -> None:
        with self.cond:
            self.queue = [r for r in refs if r not in self.done and r not in self.asked and
                          r != self.pulling]
            if self.thread is None and self.queue:
                self.thread = threading.Thread(target=self._work, daemon=True,
                                               name="bisect-ngc-prefetch")
                self.thread.start()
            self.cond.notify_all()

    def _work(self) -> None:
        while True:
            with self.cond:
                while not self.queue and not self.stopped:
                    self.cond.wait()
                if self.stopped:
                    return
                self.pulling = self.queue.pop(0)
            try:
                ensure_image(self.client(), self.pulling, lambda _: None)
                ok = True
            except (UserError, DockerException):
                ok = False
            with self.cond:
                self.done[self.pulling], self.pulling = ok, None
                self.cond.notify_all()

    def wait_for(self, ref: str) -> bool:
        """Whether ref was pulled here since it was last asked for: waits for its pull if
        it is under way, and takes it off the queue if it is not started (the probe pulls
        it itself)."""
        with self.cond:
            if ref in self.queue:
                self.queue.remove(ref)
            while self.pulling == ref:
                self.cond.wait()
            self.asked.add(ref)
            return self.done.pop(ref, False)

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.queue = []
            self.cond.notify_all()


def connect() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except DockerException as exc:
        raise UserError(f"cannot reach the Docker engine: {short_error(exc)}",
                        hint="start dockerd (scripts/docker-up.sh sets one up), or point "
                             "DOCKER_HOST at a running engine") from None
    return client


def short_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1][:300] if text else type(exc).__name__


class DockerContainers(ScriptsByShell):
    """The Containers protocol on the Docker engine, through the docker SDK."""

    # A swap container lives from its start to its exit: one exited (or never started) this
    # long ago belongs to a run that was killed, and is removed.
    STALE_AFTER_S = 600.0

    def __init__(self, client: docker.DockerClient | None = None) -> None:
        self._client, self.label = client, LABEL
        self._swept = False
        self._images: dict[str, Any] = {}

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:          # connected on first use: plans need no engine
            self._client = connect()
        if not self._swept:
            self._swept = True
            self._sweep(self._client)
        return self._client

    def _sweep(self, client: docker.DockerClient) -> None:
        """Remove the swap containers that killed runs left behind."""
        now = time.time()
        for box in client.containers.list(
                all=True, sparse=True, filters={"label": f"{self.label}.role=swap",
                                                "status": ["exited", "created"]}):
            if now - box.attrs.get("Created", now) > self.STALE_AFTER_S:
                try:
                    box.remove(force=True)
                except (NotFound, APIError):
                    pass

    def _image(self, image: str):
        """The image, looked up once per run: swaps ask for its digest and variables
        many times."""
        if image not in self._images:
            self._images[image] = ensure_image(self.client, image, lambda text: None,
                                               pull=False)
        return self._images[image]

    def digest(self, image: str) -> str:
        return self._image(image).id

    def config_env(self, image: str) -> list[str]:
        return self._image(image).attrs.get("Config", {}).get("Env") or []

    def _container(self, image: str, argv: list[str], env: dict[str, str],
                   mounts: list[tuple[Path, str, bool]]) -> tuple[int | None, str]:
        kwargs = {"user": f"{os.getuid()}:{os.getgid()}"} if os.getuid() else {}
        box = self.client.containers.create(
            image, argv, environment=env, labels={f"{self.label}.role": "swap"},
            volumes=[f"{host}:{inside}:{'ro' if ro else 'rw'}" for host, inside, ro in mounts],
            **kwargs)
        try:
            box.start()
            code = box.wait().get("StatusCode")
            return code, box.logs(stdout=True, stderr=False).decode(errors="replace")
        except APIError as exc:           # the command could not start (no such program)
            return None, short_error(exc)
        finally:
            box.remove(force=True)

    def output(self, image: str, command: str, env: dict[str, str],
               mounts: list[tuple[Path, str, bool]]) -> tuple[int | None, str]:
        return self._container(image, ["/bin/sh", "-c", command], env, mounts)


def _python_once(image: str, script: str, args: list[str], say: Callable[[str], None],
                 hint: str) -> str:
    """Run `script` once in `image` with its python (or python3); its standard output."""
    client = connect()
    ensure_image(client, image, say)
    pick = 'command -v python >/dev/null && exec python -c "$0" "$@" || exec python3 -c "$0" "$@"'
    try:
        out = client.containers.run(image, ["/bin/sh", "-c", pick, script, *args],
                                    remove=True, stdout=True, stderr=False,
                                    labels={f"{LABEL}.role": "resolve"})
    except (docker.errors.ContainerError, docker.errors.APIError) as exc:
        raise UserError(f"could not run python in {image}: {short_error(exc)}",
                        hint=hint) from None
    return out.decode(errors="replace")


def read_image_facts(image: str, say: Callable[[str], None]) -> dict[str, Any]:
    """Run the image once and read torch/CUDA/TE/Python versions from it."""
    from ...images.releases import PROBE_SCRIPT
    facts = last_json_line(_python_once(image, PROBE_SCRIPT, [], say,
                                        "the image needs a python with torch installed"))
    if not facts:
        raise UserError(f"{image} printed no facts", hint="is python installed in the image?")
    return facts


def distribution_version(image: str, dist: str, say: Callable[[str], None]) -> str | None:
    """The version of Python distribution `dist` in `image`, or None if it has none."""
    script = ("import importlib.metadata as m, sys\ntry:\n    print(m.version(sys.argv[1]))\n"
              "except m.PackageNotFoundError:\n    pass\n")
    lines = _python_once(image, script, [dist], say, "the image needs python to say which "
                         "version it ships").strip().splitlines()
    return lines[-1].strip() if lines else None
