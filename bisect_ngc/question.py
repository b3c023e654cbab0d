"""From command-line options to what a bisection needs: the range, the recipe, the backend.

Two ways to ask:
- generic: --repo, --old, --new, --build, --test (any repository);
- release mode: --from and --to name NGC releases, images or commits; the repository is
  PyTorch, the base image is the older release's, and the recipe is the PyTorch preset
  (build a wheel in the image, test it with the repro) unless --build/--test override it.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .artifacts import ArtifactStore
from .backends.docker import DockerBackend, DockerRecipe
from .backends.local import LocalBackend
from .backends.slurm import SlurmBackend, SlurmSettings
from .engine import Range
from .errors import UserError
from .history import History, Worktrees
from .recipes import REPRO_IN_CONTAINER, local_cuda_arch, pytorch_preset, repro_dir
from .releases import UPSTREAM, Catalog, Endpoint
from .store import Store

DEFAULT_CUDA_ARCH = "9.0"


@dataclass
class Options:
    cache_dir: Path
    state: Path
    repo: str | None = None
    old: str | None = None
    new: str | None = None
    from_: str | None = None
    to: str | None = None
    torch_repo: str = UPSTREAM
    build: str | None = None
    test: str | None = None
    timeout: float | None = None
    build_timeout: float | None = None
    no_clean: bool = False
    backend: str | None = None
    image: str | None = None
    base_image: str | None = None
    cuda_arch: str | None = None
    max_jobs: int | None = None
    repro_args: str = ""
    gpus: str = "auto"
    build_tree: bool | None = None
    slurm: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def release_mode(self) -> bool:
        return bool(self.from_ or self.to)

    def check(self) -> None:
        if self.release_mode:
            if not (self.from_ and self.to):
                raise UserError("--from and --to go together",
                                hint="e.g. --from 24.09 --to 24.10")
            if self.old or self.new:
                raise UserError("use either --from/--to (releases) or --old/--new (revisions)",
                                hint="--from 24.09 --to 24.10, or --repo R --old A --new B")
        else:
            if not (self.old and self.new):
                raise UserError("say what to bisect: --old and --new, or --from and --to",
                                hint="e.g. --repo . --old v1.0 --new main, or --from 24.09 "
                                     "--to 24.10")
            if not self.test:
                raise UserError("--test is required outside release mode",
                                hint="a shell command whose exit code is the verdict "
                                     "(0 pass, 1-127 fail, 125 skip)")
        if self.backend_name == "slurm" and not self.release_mode and not self.test:
            raise UserError("--backend slurm needs --test", hint="or use release mode")
        if self.backend_name == "docker" and not self.release_mode and not self.image:
            raise UserError("--backend docker needs --image for a generic recipe",
                            hint="name an image that has what --build and --test need")

    @property
    def backend_name(self) -> str:
        return self.backend or ("docker" if self.release_mode else "local")


def endpoints(opts: Options, catalog: Catalog) -> tuple[Endpoint, Endpoint]:
    if opts.release_mode:
        return catalog.endpoint(opts.from_), catalog.endpoint(opts.to)
    return Endpoint(opts.old, "commit", opts.old), Endpoint(opts.new, "commit", opts.new)


def labels(old: Endpoint, new: Endpoint) -> dict[str, Any]:
    out: dict[str, Any] = {"old": old.label, "new": new.label}
    for side, ep in (("old", old), ("new", new)):
        if ep.release:
            out[f"{side}_release"] = ep.release.name
            out[f"{side}_torch_version"] = ep.release.torch_version
        if ep.image:
            out[f"{side}_image"] = ep.image
    return out


def open_range(opts: Options, old: Endpoint, new: Endpoint) -> Range:
    spec = opts.torch_repo if opts.release_mode else (opts.repo or ".")
    history = History.open(spec, opts.cache_dir)
    old_sha, new_sha = history.resolve(old.rev), history.resolve(new.rev)
    candidates = history.candidates(old_sha, new_sha)
    return Range(history, old_sha, new_sha, candidates, history.identity(new_sha),
                 labels(old, new))


def base_image(opts: Options, old: Endpoint, new: Endpoint) -> str:
    image = opts.base_image or opts.image or old.image
    if not image:
        raise UserError("no base image: --from is a commit, not a release",
                        hint="pass --base-image nvcr.io/nvidia/pytorch:YY.MM-py3")
    return image


def docker_recipe(opts: Options, old: Endpoint, new: Endpoint) -> DockerRecipe:
    image = base_image(opts, old, new)
    if not opts.release_mode:
        return DockerRecipe(image=image, build=opts.build, test=opts.test, gpus=opts.gpus,
                            build_tree=bool(opts.build_tree))
    arch = opts.cuda_arch or local_cuda_arch()
    if arch is None:
        arch = DEFAULT_CUDA_ARCH
        opts.notes.append(f"no local GPU found: building for compute capability {arch} "
                          "(pass --cuda-arch to change it)")
    recipe = pytorch_preset(image, cuda_arch=arch, max_jobs=opts.max_jobs,
                            repro_args=shlex.split(opts.repro_args),
                            gpus="all" if opts.gpus == "auto" else opts.gpus,
                            build_tree=opts.build_tree is not False)
    if opts.build:
        recipe.build, recipe.build_image, recipe.build_dockerfile = opts.build, None, None
    if opts.test:
        recipe.test, recipe.expect_torch_commit = opts.test, False
    return recipe


def slurm_backend(opts: Options, rng: Range, old: Endpoint, new: Endpoint, store: Store,
                  say: Callable[[str], None]) -> SlurmBackend:
    cfg = dict(opts.slurm)
    shared = Path(cfg.pop("shared_dir", None) or opts.state / "slurm").expanduser().resolve()
    runtime = cfg.get("runtime", "none")
    image = opts.image or opts.base_image or (old.image if opts.release_mode else None)
    settings = SlurmSettings(shared_dir=shared, image=image, **cfg)
    build, test, mounts = opts.build, opts.test, []
    if opts.release_mode:
        recipe = pytorch_preset(
            base_image(opts, old, new), cuda_arch=opts.cuda_arch or local_cuda_arch()
            or DEFAULT_CUDA_ARCH, max_jobs=opts.max_jobs,
            repro_args=shlex.split(opts.repro_args),
            repro_parent=REPRO_IN_CONTAINER if runtime != "none" else str(repro_dir().parent))
        build, test = opts.build or recipe.build, opts.test or recipe.test
        mounts = recipe.mounts if runtime != "none" else []
    worktrees = Worktrees(rng.history, shared / "worktrees" / rng.repo_id[:12])
    return SlurmBackend(worktrees, build=build, test=test, settings=settings, store=store,
                        artifacts=ArtifactStore(shared / "artifacts"), timeout=opts.timeout,
                        build_timeout=opts.build_timeout, mounts=mounts, say=say)


def make_backend(opts: Options, rng: Range, old: Endpoint, new: Endpoint,
                 say: Callable[[str], None], store: Store | None = None):
    worktrees = Worktrees(rng.history, opts.state / "worktrees" / rng.repo_id[:12])
    if opts.backend_name == "local":
        if opts.release_mode and not (opts.build and opts.test):
            raise UserError("--backend local in release mode needs --build and --test",
                            hint="or use --backend docker for the PyTorch recipe")
        return LocalBackend(worktrees, build=opts.build, test=opts.test, timeout=opts.timeout,
                            build_timeout=opts.build_timeout, clean=not opts.no_clean)
    if opts.backend_name == "docker":
        return DockerBackend(worktrees, docker_recipe(opts, old, new),
                             artifacts=ArtifactStore(opts.cache_dir / "artifacts"),
                             cache_dir=opts.cache_dir, state_dir=opts.state,
                             timeout=opts.timeout, build_timeout=opts.build_timeout, say=say)
    if opts.backend_name == "slurm" and store is not None:
        return slurm_backend(opts, rng, old, new, store, say)
    raise UserError(f"unknown backend '{opts.backend_name}'", hint="use local, docker or slurm")
