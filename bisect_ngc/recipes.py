"""Build-and-test recipes rendered from the jinja2 templates in dockerfiles/.

The PyTorch preset is the generic container recipe with its build and test commands
rendered from templates: build a wheel inside the (older) NGC image, install it into a
fresh container of that image, and run the repro.
"""
from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jinja2

from .backends.docker import DockerRecipe, Mount
from .store import digest

REPRO_IN_CONTAINER = "/opt/bisect-ngc"



def _template_dirs() -> list[str]:
    """dockerfiles/ of a source checkout, or the installed bisect_ngc.dockerfiles."""
    dirs = [Path(__file__).resolve().parents[1] / "dockerfiles"]
    spec = importlib.util.find_spec("bisect_ngc.dockerfiles")
    if spec and spec.submodule_search_locations:
        dirs += [Path(p) for p in spec.submodule_search_locations]
    return [str(d) for d in dirs if d.is_dir()]


_env = jinja2.Environment(loader=jinja2.FileSystemLoader(_template_dirs()),
                          undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                          autoescape=False)
_env.filters["q"] = lambda value: shlex.quote(str(value))


def render(template: str, **values: Any) -> str:
    return _env.get_template(template).render(**values)


def local_cuda_arch() -> str | None:
    """The compute capability of this host's first GPU (e.g. '9.0'), if nvidia-smi says."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out else None


def repro_dir() -> Path:
    spec = importlib.util.find_spec("repro")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the repro package is not installed next to bisect_ngc")
    return Path(list(spec.submodule_search_locations)[0])


def pytorch_preset(base_image: str, *, cuda_arch: str, max_jobs: int | None = None,
                   repro_args: list[str] | None = None, ccache_size: str = "50G",
                   extra_env: dict[str, str] | None = None, gpus: str = "all",
                   build_tree: bool = True,
                   repro_parent: str = REPRO_IN_CONTAINER) -> DockerRecipe:
    """The PyTorch recipe, with the builder Dockerfile it needs."""
    settings = {"cuda_arch": cuda_arch, "max_jobs": max_jobs or os.cpu_count() or 1,
                "ccache_size": ccache_size, "extra_env": sorted((extra_env or {}).items())}
    build = render("pytorch-build.sh.j2", base_image=base_image, **settings)
    test = render("pytorch-test.sh.j2", base_image=base_image,
                  repro_parent=repro_parent,
                  repro_args=shlex.join(repro_args or []))
    dockerfile = render("builder.Dockerfile.j2", base_image=base_image,
                        recipe_hash=digest([build, settings])[:16])
    recipe = DockerRecipe(
        image=base_image, build=build, test=test,
        build_image=f"bisect-ngc/builder:{digest(dockerfile)[:12]}", build_dockerfile=dockerfile,
        mounts=[Mount(repro_dir(), f"{REPRO_IN_CONTAINER}/repro")],
        build_settings={k: v for k, v in settings.items() if k != "ccache_size"},
        build_tree=build_tree, expect_torch_commit=True, gpus=gpus)
    return recipe
