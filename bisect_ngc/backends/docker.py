"""Build and test in containers through the docker SDK.

Each probe builds in a container of the build image with the commit's worktree, the git
directory, a ccache directory and (optionally) a per-slot build tree mounted at the same
paths as on the host, so BISECT_* paths mean the same inside and out. The build writes
into $BISECT_ARTIFACTS, a content-addressed entry reused by later sessions. The test runs
in a fresh container of the base image that sees the artifacts read-only, with GPUs,
--ipc=host and NGC's ulimits.
"""
from __future__ import annotations

import io
import os
import resource
import threading
import time
from pathlib import Path
from typing import Any, Callable

import docker
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.types import DeviceRequest, Ulimit

from ..artifacts import ArtifactStore
from ..errors import UserError
from ..history import Worktrees
from ..recipes import Mount, Recipe
from ..keys import digest
from ..verdicts import BuildFact, RunFact
from .base import (BackendLost, BackendSetup, Cancelled, PhaseCallback, ProbeFailed,
                   ProbeOutcome, ProbeRequest, ThreadedRounds, fetch_prebuilt, last_json_line,
                   probe_env, run_tests)

LABEL = "bisect-ngc"
NGC_ULIMITS = [Ulimit(name="memlock", soft=-1, hard=-1),
               Ulimit(name="stack", soft=67108864, hard=67108864)]


def ensure_image(client: docker.DockerClient, ref: str, say: Callable[[str], None]):
    """The image, pulled with progress if it is not here yet."""
    try:
        return client.images.get(ref)
    except ImageNotFound:
        pass
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
        raise UserError(f"could not pull {ref}: {_short(exc)}",
                        hint="for NGC images run `docker login nvcr.io` (user $oauthtoken, "
                             "password: your NGC API key); check the image name") from None


def connect() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except DockerException as exc:
        raise UserError(f"cannot reach the Docker engine: {_short(exc)}",
                        hint="start dockerd (scripts/docker-up.sh sets one up), or point "
                             "DOCKER_HOST at a running engine") from None
    return client


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1][:300] if text else type(exc).__name__


class DockerBackend(ThreadedRounds):
    name = "docker"
    tiers = ("image", "nightly", "prebuilt", "overlay")

    def __init__(self, worktrees: Worktrees, recipe: Recipe, *, artifacts: ArtifactStore,
                 cache_dir: Path, state_dir: Path, say: Callable[[str], None] | None = None,
                 client: docker.DockerClient | None = None):
        super().__init__()
        self.worktrees = worktrees
        self.recipe = recipe
        self.artifacts = artifacts
        self.cache_dir = cache_dir
        self.say = say or (lambda text: None)
        self.client = client
        self.state_label = digest(str(state_dir))[:12]
        self.image_digest = ""
        self.ulimits = NGC_ULIMITS
        self.use_gpus = recipe.gpus == "all"
        self.session = ""
        self.cancelled = threading.Event()
        self._containers: dict[str, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def create(cls, setup: BackendSetup) -> "DockerBackend":
        return cls(setup.worktrees(setup.options["worktrees"]), setup.recipe,
                   artifacts=ArtifactStore(setup.artifact_store), cache_dir=setup.cache_dir,
                   state_dir=setup.state, say=setup.say)

    # --- the interface -------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "image_digest": self.image_digest,
                "gpus": self.use_gpus}

    def environment(self) -> str:
        return f"docker:{self.image_digest or self.recipe.image}:gpus={self.use_gpus}"

    def prepare(self) -> None:
        self.client = self.client or connect()
        image = self.ensure_image(self.recipe.image)
        self.image_digest = (image.attrs.get("RepoDigests") or [image.id])[0]
        if self.recipe.build_image:
            self.ensure_build_image()
        self.ulimits = self._usable_ulimits(image.id)
        if self.recipe.gpus == "auto":
            self.use_gpus = "nvidia" in (self.client.info().get("Runtimes") or {})
        left = self.client.containers.list(all=True, filters={
            "label": f"{LABEL}.state={self.state_label}"})
        for c in left:
            c.remove(force=True)
        if left:
            self.say(f"removed {len(left)} container(s) left behind by an interrupted run")

    def containers(self) -> "DockerContainers":
        """Containers of whole images, for swap probes between release images."""
        return DockerContainers(self.client)      # None before prepare(): connects when used

    def cancel(self) -> None:
        with self._lock:      # with _container's registration: none slips in between
            self.cancelled.set()
            containers = list(self._containers.values())
        for c in containers:
            try:
                c.remove(force=True)
            except (NotFound, APIError):
                pass

    # --- images ------------------------------------------------------------------
    def ensure_image(self, ref: str):
        return ensure_image(self.client, ref, self.say)

    def _usable_ulimits(self, image_id: str) -> list[Ulimit]:
        """NGC's ulimits, unless the engine may not raise memlock that far (an unprivileged
        engine, as in CI): then the host's own hard limit, with a warning."""
        trial = self.client.containers.create(image_id, ["/bin/sh", "-c", "exit 0"],
                                              ulimits=NGC_ULIMITS,
                                              labels={f"{LABEL}.state": self.state_label})
        try:
            trial.start()
            trial.wait()
            return NGC_ULIMITS
        except APIError as exc:
            if "rlimit" not in str(exc):
                return NGC_ULIMITS
        finally:
            trial.remove(force=True)
        hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
        self.say(f"the engine refused memlock=unlimited; test containers get the host's "
                 f"limit ({hard} bytes)")
        return [Ulimit(name="memlock", soft=hard, hard=hard), NGC_ULIMITS[1]]

    def ensure_build_image(self):
        r = self.recipe
        if not r.build_dockerfile:
            return self.ensure_image(r.build_image)
        try:
            return self.client.images.get(r.build_image)
        except ImageNotFound:
            pass
        self.say(f"building {r.build_image} from {r.image} (legacy builder)")
        try:
            image, _ = self.client.images.build(fileobj=io.BytesIO(r.build_dockerfile.encode()),
                                                tag=r.build_image, rm=True, forcerm=True)
        except (APIError, DockerException) as exc:
            raise UserError(f"could not build the build image {r.build_image}: {_short(exc)}",
                            hint="check that the base image has a shell and a package "
                                 "manager, or pass --build-image") from None
        return image

    # --- one probe ---------------------------------------------------------------
    def build_trees(self, slot: int) -> list[Path]:
        """The slot's persistent build/ (the PyTorch recipe's), mounted into its builds."""
        if not self.recipe.build_tree:
            return []
        return [self.cache_dir / "build-trees" /
                f"{self.worktrees.root.name}-{self.image_digest[-12:]}" / f"slot-{slot}"]

    def _probe(self, req: ProbeRequest, on_phase: PhaseCallback) -> ProbeOutcome:
        self.session = req.session
        wt = self._checkout(req, on_phase, clean=True)
        r = self.recipe
        logs: dict[str, Path] = {}
        if req.tier == "image":      # the image as it is: nothing to build or install
            image, test = req.source.ref, r.test_as_is or r.test
            art_path = self.artifacts.as_is().path
            self.ensure_image(image)
            build = None
            details: dict[str, Any] = {}
        elif req.source is not None:      # a nightly, a given wheel or an overlay
            on_phase(req, "download")
            image, test, art_path = r.image, r.test, fetch_prebuilt(self.artifacts, req,
                                                                    self.say)
            build, details = None, {}
        else:
            image, test = r.image, r.test
            art_path, build, details, logs = self._build(req, on_phase, wt)
            if art_path is None:      # the build failed: no test to run
                return _annotated(run_tests(req, on_phase, None, build), logs, details)

        def once(i: int) -> RunFact:
            logs[f"test-{i}"] = log = req.log_dir / f"test-{i}.log"
            code, secs, timed_out = self._container(req, "test", image, test, wt, art_path,
                                                    log, r.timeout, artifacts_rw=False)
            return RunFact(code, secs, timed_out, r.timeout,
                           last_json_line(log.read_text(errors="replace")))

        return _annotated(run_tests(req, on_phase, once, build), logs, details)

    def _build(self, req: ProbeRequest, on_phase: PhaseCallback, wt: Path):
        """(artifact path or None, BuildFact or None, details, logs) for a source build."""
        r = self.recipe
        key = ArtifactStore.key(req.commit, r.image or "", r.build_key())
        logs: dict[str, Path] = {}
        art = self.artifacts.get(key)
        if art is not None and art.meta.get("image_digest") not in (None, self.image_digest):
            art = None     # the same image name now points at other contents: rebuild
        build = None
        details: dict[str, Any] = {"artifact": key, "build_reused": art is not None}
        if art is None:
            on_phase(req, "build")
            logs["build"] = req.log_dir / "build.log"
            with self.artifacts.staging(key) as staging:
                code, secs, timed_out = self._container(
                    req, "build", r.build_image or r.image, r.build or "true", wt, staging,
                    logs["build"], r.build_timeout, artifacts_rw=True)
                build = BuildFact(code, secs, timed_out, r.build_timeout)
                if code == 0 and not timed_out:
                    art = self.artifacts.publish(key, staging, {
                        "commit": req.commit, "image": r.image,
                        "image_digest": self.image_digest, "build_s": secs,
                        "settings": r.build_settings, "backend": self.name})
        return (art.path if art else None), build, details, logs

    def _mounts(self, req: ProbeRequest, wt: Path, artifacts: Path, artifacts_rw: bool
                ) -> list[Mount]:
        """The worktree, and git's directories so that git works inside: the repository's
        common directories read-only, this worktree's own part of them read-write."""
        admin = self.worktrees.admin_dir(wt)
        mounts = [Mount(wt, str(wt), read_only=False),
                  *(Mount(d, str(d)) for d in self.worktrees.git_dirs())]
        subs = self.worktrees.submodules
        if subs is not None and subs.root.exists():    # the objects submodules borrow
            mounts.append(Mount(subs.root, str(subs.root)))
        if admin is not None:
            mounts.append(Mount(admin, str(admin), read_only=False))
        mounts.append(Mount(artifacts, str(req.artifacts_dir), read_only=not artifacts_rw))
        return mounts + list(self.recipe.mounts)

    def _container(self, req: ProbeRequest, role: str, image: str, command: str, wt: Path,
                   artifacts: Path, log: Path, timeout: float | None, *,
                   artifacts_rw: bool) -> tuple[int | None, float, bool]:
        if self.cancelled.is_set():
            raise Cancelled()
        r = self.recipe
        ccache = self.cache_dir / "ccache"
        ccache.mkdir(parents=True, exist_ok=True)
        mounts = self._mounts(req, wt, artifacts, artifacts_rw)
        env = dict(r.env, **probe_env(req, wt))
        kwargs: dict[str, Any] = {}
        if role == "build":
            mounts.append(Mount(ccache, str(ccache), read_only=False))
            env["CCACHE_DIR"] = str(ccache)
            for tree in self.build_trees(req.slot):
                tree.mkdir(parents=True, exist_ok=True)
                mounts.append(Mount(tree, str(wt / "build"), read_only=False))
            if os.getuid() != 0:
                kwargs["user"] = f"{os.getuid()}:{os.getgid()}"
        else:
            kwargs.update(ipc_mode="host", ulimits=self.ulimits)
            if self.use_gpus:
                kwargs["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
        labels = {f"{LABEL}.session": req.session, f"{LABEL}.state": self.state_label,
                  f"{LABEL}.role": role, f"{LABEL}.commit": req.commit}
        log.parent.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        # A list, not a dict keyed by host path: one host path may be mounted twice.
        volumes = [f"{m.host}:{m.container}:{'ro' if m.read_only else 'rw'}" for m in mounts]
        container = None
        timed_out = threading.Event()
        timer = None
        try:
            container = self.client.containers.create(
                image, ["/bin/sh", "-c", command], working_dir=str(wt), environment=env,
                labels=labels, volumes=volumes, **kwargs)
            with self._lock:
                cancelled = self.cancelled.is_set()
                if not cancelled:
                    self._containers[container.id] = container
            if cancelled:       # created while Ctrl-C was being handled: never started
                container.remove(force=True)
                container = None
                raise Cancelled()

            def expire() -> None:
                timed_out.set()
                try:
                    container.kill()
                except (NotFound, APIError):
                    pass

            timer = threading.Timer(timeout, expire) if timeout else None
            container.start()
            if timer:
                timer.start()
            with open(log, "wb") as out:
                out.write(f"$ [{role} in {image}] {command}\n".encode())
                for chunk in container.logs(stream=True, follow=True):
                    out.write(chunk)
            code = container.wait().get("StatusCode")
        except (DockerException, OSError) as exc:
            if self.cancelled.is_set():
                raise Cancelled() from None
            self._check_engine()
            raise ProbeFailed(f"docker could not run the {role} container: {_short(exc)}") \
                from None
        finally:
            if timer:
                timer.cancel()
            if container is not None:
                with self._lock:
                    self._containers.pop(container.id, None)
                try:
                    container.remove(force=True)
                except (NotFound, APIError):
                    pass
        if self.cancelled.is_set():
            raise Cancelled()
        return code, time.monotonic() - start, timed_out.is_set()

    def _check_engine(self) -> None:
        try:
            self.client.ping()
        except (DockerException, OSError) as exc:
            raise BackendLost(f"lost the Docker engine: {_short(exc)}",
                              hint="start dockerd again and run the same command to "
                                   "resume") from None


def _annotated(outcome: ProbeOutcome, logs: dict[str, Path],
               details: dict[str, Any]) -> ProbeOutcome:
    outcome.logs = logs
    outcome.details = dict(outcome.details, **details)
    return outcome


class DockerContainers:
    """The Containers protocol on the Docker engine, through the docker SDK."""

    # A swap container lives from its start to its exit: one exited (or never started) this
    # long ago belongs to a run that was killed, and is removed.
    STALE_AFTER_S = 600.0

    def __init__(self, client: docker.DockerClient | None = None) -> None:
        self._client, self.label = client, LABEL
        self._swept = False

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:          # connected on first use: plans need no engine
            self._client = connect()
        if not self._swept:
            self._swept = True
            self._sweep()
        return self._client

    def _sweep(self) -> None:
        """Remove the swap containers that killed runs left behind."""
        now = time.time()
        for box in self._client.containers.list(
                all=True, sparse=True, filters={"label": f"{self.label}.role=swap",
                                                "status": ["exited", "created"]}):
            if now - box.attrs.get("Created", now) > self.STALE_AFTER_S:
                try:
                    box.remove(force=True)
                except (NotFound, APIError):
                    pass

    def _image(self, image: str):
        try:
            return self.client.images.get(image)
        except ImageNotFound:
            raise UserError(f"image {image} is not on this Docker engine",
                            hint=f"docker pull {image}") from None

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
            return None, _short(exc)
        finally:
            box.remove(force=True)

    def python_json(self, image: str, script: str, args: list[str],
                    mounts: list[tuple[Path, str, bool]]) -> str:
        code, out = self._container(image, ["python3", "-c", script, *args], {}, mounts)
        if code != 0:
            why = f"python3 exited {code}" if code is not None else "no python3 to start"
            raise UserError(f"could not read the components of {image} ({why})",
                            hint="the image needs python3; is it a PyTorch image?")
        return out.strip().splitlines()[-1] if out.strip() else "{}"

    def run(self, image: str, command: str, env: dict[str, str],
            mounts: list[tuple[Path, str, bool]]) -> int | None:
        return self._container(image, ["/bin/sh", "-c", command], env, mounts)[0]


def read_image_facts(image: str, say: Callable[[str], None]) -> dict[str, Any]:
    """Run the image once and read torch/CUDA/TE/Python versions from it."""
    from ..releases import PROBE_SCRIPT
    client = connect()
    ensure_image(client, image, say)
    script = "command -v python >/dev/null && exec python -c \"$0\" || exec python3 -c \"$0\""
    try:
        out = client.containers.run(image, ["/bin/sh", "-c", script, PROBE_SCRIPT],
                                    remove=True, stdout=True, stderr=False,
                                    labels={f"{LABEL}.role": "resolve"})
    except docker.errors.ContainerError as exc:
        raise UserError(f"could not run python in {image}: {_short(exc)}",
                        hint="the image needs a python with torch installed") from None
    facts = last_json_line(out.decode(errors="replace"))
    if not facts:
        raise UserError(f"{image} printed no facts", hint="is python installed in the image?")
    return facts
