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
from typing import Any, Callable, Sequence

import docker
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.types import DeviceRequest, Ulimit

from ...core.artifacts import ArtifactStore
from ...companions.sources import CompanionSources
from ...companions.specs import install_prelude
from ...errors import UserError
from ...vcs.worktrees import Worktrees
from ...core.recipes import Mount, Recipe
from ...core.keys import digest
from ...core.verdicts import BuildFact, RunFact
from ...companions.builds import CompanionBuilds, torch_identity
from .engine import LABEL, DockerContainers, Prefetch, connect, ensure_image, short_error
from ...core.probes import BackendLost, BackendSetup, Cancelled, PhaseCallback, ProbeFailed, ProbeRequest, test_plan
from ..base import (ProbeOutcome, ThreadedRounds, cap_log, controller, controller_alive,
                    fetch_prebuilt, last_json_line, probe_env, run_tests)

NGC_ULIMITS = [Ulimit(name="memlock", soft=-1, hard=-1),
               Ulimit(name="stack", soft=67108864, hard=67108864)]


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
        self._client = client
        self.state_label = digest(str(state_dir))[:12]
        self.image_digest = ""
        self.ulimits = NGC_ULIMITS
        self.use_gpus = recipe.gpus == "all"
        self.session = ""
        self.cancelled = threading.Event()
        self._containers: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._prefetch = Prefetch(lambda: self.client)
        self.companions = CompanionBuilds(recipe.companions, artifacts, CompanionSources(
            cache_dir), recipe.build_timeout) if recipe.companions else None

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

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:      # prepare() connects first; plans never ask
            self._client = connect()
        return self._client

    def prepare(self) -> None:
        self._client = self._client or connect()
        image = self.ensure_image(self.recipe.image)
        self.image_digest = (image.attrs.get("RepoDigests") or [image.id])[0]
        if self.recipe.build_image:
            self.ensure_build_image()
        self.ulimits = self._usable_ulimits(image.id)
        if self.recipe.gpus == "auto":
            self.use_gpus = "nvidia" in (self.client.info().get("Runtimes") or {})
        left = [c for c in self.client.containers.list(all=True, filters={
            "label": f"{LABEL}.state={self.state_label}"})
            if not controller_alive(c.labels.get(f"{LABEL}.controller"))]
        for c in left:
            c.remove(force=True)
        if left:
            self.say(f"removed {len(left)} container(s) left behind by an interrupted run")

    def containers(self) -> "DockerContainers":
        """Containers of whole images, for swap probes between release images."""
        return DockerContainers(self._client)    # None before prepare(): connects when used

    def cancel(self) -> None:
        self._prefetch.stop()
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
        if self._prefetch.wait_for(ref):
            self.say(f"{ref}: pulled in the background during the last round")
        return ensure_image(self.client, ref, self.say)

    def prefetch(self, images: Sequence[str], *, done: bool = False) -> None:
        if not self.cancelled.is_set():         # a pull under way finishes: one thread
            self._prefetch.start(images)

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
            raise UserError(f"could not build the build image {r.build_image}: {short_error(exc)}",
                            hint="check that the base image has a shell and a package "
                                 "manager, or pass --build-image") from None
        return image

    # --- one probe ---------------------------------------------------------------
    def build_trees(self, slot: int) -> list[Path]:
        """The slot's persistent build/ (the PyTorch recipe's), mounted into its builds."""
        if not self.recipe.build_tree:
            return []
        return [self.cache_dir / "build-trees" /
                f"{self.worktrees.name}-{self.image_digest[-12:]}" / f"slot-{slot}"]

    def _probe(self, req: ProbeRequest, on_phase: PhaseCallback) -> ProbeOutcome:
        self.session = req.session
        wt = self._checkout(req, on_phase, clean=True)
        r = self.recipe
        logs: dict[str, Path] = {}
        plan = test_plan(req, r)
        test = plan.test
        image = plan.image or r.image or ""      # Docker runs every test in an image
        build, details = None, {}
        if plan.artifacts == "none":
            art_path = self.artifacts.as_is().path
            self.ensure_image(image)
        elif plan.artifacts == "ready":
            on_phase(req, "download")
            art_path = fetch_prebuilt(self.artifacts, req, self.say)
        else:
            art_path, build, details, logs = self._build(req, on_phase, wt)
            if art_path is None:      # the build failed: no test to run
                return _annotated(run_tests(req, on_phase, None, build), logs, details)
        extra: list[Mount] = []
        if self.companions is not None:
            made = self._companions(self.companions, req, image, wt, art_path, details, logs,
                                    on_phase)
            if isinstance(made, ProbeOutcome):
                return _annotated(made, logs, details)
            test, extra = install_prelude(made.installed, test), made.mounts

        def once(i: int) -> RunFact:
            logs[f"test-{i}"] = log = req.log_dir / f"test-{i}.log"
            code, secs, timed_out = self._container(req, "test", image, test, wt, art_path,
                                                    log, r.timeout, artifacts_rw=False,
                                                    extra=extra)
            return RunFact(code, secs, timed_out, r.timeout,
                           last_json_line(log.read_text(errors="replace")))

        return _annotated(run_tests(req, on_phase, once, build), logs, details)

    def _companions(self, companions: CompanionBuilds, req: ProbeRequest, image: str, wt: Path,
                    art_path: Path, details: dict[str, Any], logs: dict[str, Path],
                    on_phase: PhaseCallback):
        """The --with companions for this probe's torch (built in its image where they
        compile against it), or the probe's skip."""
        own = image == self.recipe.image
        image_digest = self.image_digest if own else self.ensure_image(image).id
        torch_id = torch_identity(test_plan(req, self.recipe).artifacts, art_path,
                                  req.source.ref if req.source else "", image_digest)

        def run(image, command, mounts, env, log, timeout):
            logs[log.stem] = log
            return self._container(req, "companion", image, command, wt, art_path, log,
                                   timeout, artifacts_rw=False, extra=mounts, env=env)

        made = companions.ready(image, image_digest, torch_id, req.log_dir, run,
                                     lambda: on_phase(req, "build"))
        if not isinstance(made, ProbeOutcome):
            details["companions_built"] = made.built
        return made

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
                   artifacts: Path, log: Path, timeout: float | None, *, artifacts_rw: bool,
                   extra: Sequence[Mount] = (), env: dict[str, str] | None = None
                   ) -> tuple[int | None, float, bool]:
        """Run one build, companion build or test container to its end: (exit code,
        seconds, timed out)."""
        if self.cancelled.is_set():
            raise Cancelled()
        volumes, env, kwargs = self._spec(req, role, wt, artifacts, artifacts_rw, extra,
                                          env or {})
        labels = {f"{LABEL}.session": req.session, f"{LABEL}.state": self.state_label,
                  f"{LABEL}.role": role, f"{LABEL}.commit": req.commit,
                  f"{LABEL}.controller": controller()}
        log.parent.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        container, timer, timed_out = None, None, threading.Event()
        try:
            container = self._create(image, ["/bin/sh", "-c", command], working_dir=str(wt),
                                     environment=env, labels=labels, volumes=volumes, **kwargs)
            timer = threading.Timer(timeout, _expire, (container, timed_out)) if timeout \
                else None
            container.start()
            if timer:
                timer.start()
            with open(log, "wb") as out:
                out.write(f"$ [{role} in {image}] {command}\n".encode())
                for chunk in container.logs(stream=True, follow=True):
                    out.write(chunk)
            cap_log(log)
            code = container.wait().get("StatusCode")
        except (DockerException, OSError) as exc:
            if self.cancelled.is_set():
                raise Cancelled() from None
            self._check_engine()
            raise ProbeFailed(f"docker could not run the {role} container: "
                              f"{short_error(exc)}") from None
        finally:
            if timer:
                timer.cancel()
            if container is not None:
                self._remove(container)
        if self.cancelled.is_set():
            raise Cancelled()
        return code, time.monotonic() - start, timed_out.is_set()

    def _spec(self, req: ProbeRequest, role: str, wt: Path, artifacts: Path,
              artifacts_rw: bool, extra: Sequence[Mount], more_env: dict[str, str]
              ) -> tuple[list[str], dict[str, str], dict[str, Any]]:
        """A container's volumes, environment and other settings for its role: a build gets
        ccache and the slot's build tree as this user, a test the GPUs and NGC's limits."""
        mounts = self._mounts(req, wt, artifacts, artifacts_rw) + list(extra)
        env = dict(self.recipe.env, **probe_env(req, wt), **more_env)
        kwargs: dict[str, Any] = {}
        if role == "build":
            ccache = self.cache_dir / "ccache"
            ccache.mkdir(parents=True, exist_ok=True)
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
        # A list, not a dict keyed by host path: one host path may be mounted twice.
        volumes = [f"{m.host}:{m.container}:{'ro' if m.read_only else 'rw'}" for m in mounts]
        return volumes, env, kwargs

    def _create(self, image: str, argv: list[str], **settings: Any):
        """A created container, registered for cancel(); one created while Ctrl-C is being
        handled is removed, never started."""
        container = self.client.containers.create(image, argv, **settings)
        with self._lock:
            cancelled = self.cancelled.is_set()
            if not cancelled:
                self._containers[container.id] = container
        if cancelled:
            container.remove(force=True)
            raise Cancelled()
        return container

    def _remove(self, container) -> None:
        with self._lock:
            self._containers.pop(container.id, None)
        try:
            container.remove(force=True)
        except (NotFound, APIError):
            pass

    def _check_engine(self) -> None:
        try:
            self.client.ping()
        except (DockerException, OSError) as exc:
            raise BackendLost(f"lost the Docker engine: {short_error(exc)}",
                              hint="start dockerd again and run the same command to "
                                   "resume") from None


def _annotated(outcome: ProbeOutcome, logs: dict[str, Path],
               details: dict[str, Any]) -> ProbeOutcome:
    outcome.logs = logs
    outcome.details = dict(outcome.details, **details)
    return outcome


def _expire(container, timed_out: threading.Event) -> None:
    """--timeout: the run is over; its container is killed."""
    timed_out.set()
    try:
        container.kill()
    except (NotFound, APIError):
        pass
