"""Which differing components to suspect first. Pure (its one import is a table).

Two images' configs say which components moved (their `*_VERSION` variables and labels,
`prebuilt.image_config.diff`); a symptom says which of those usually cause it (a hang
in a collective: NCCL and its network stack). `suspects` turns both into an order over
the inventory's units: what the symptom names and moved, then what else moved, then the
rest. A unit no config names (a Python package, a library of no listed component) is
never dropped: it comes after the suspects, and the search still reaches it.
"""
from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Collection, Sequence

from ..prebuilt.image_config import COMPONENTS

# component (as image_config names it) -> the inventory units that carry it, besides the
# variables image_config reads its version from (env:NCCL_VERSION, ...). Library units are
# named by the file's name before ".so" (libnccl, libcudnn_ops); distributions as PEP 503.
UNITS: dict[str, tuple[str, ...]] = {
    "torch": ("py:torch",),
    "cuda": ("lib:libcudart", "lib:libnvrtc*", "lib:libnvJitLink", "py:nvidia-cuda-*"),
    "cublas": ("lib:libcublas", "lib:libcublasLt", "py:nvidia-cublas*"),
    "cudnn": ("lib:libcudnn", "lib:libcudnn_*", "py:nvidia-cudnn-cu*"),
    "cudnn-frontend": ("py:nvidia-cudnn-frontend", "py:cudnn"),
    "cufft": ("lib:libcufft", "lib:libcufftw", "py:nvidia-cufft*"),
    "curand": ("lib:libcurand", "py:nvidia-curand*"),
    "cusolver": ("lib:libcusolver", "lib:libcusolverMg", "py:nvidia-cusolver*"),
    "cusparse": ("lib:libcusparse", "py:nvidia-cusparse-cu*"),
    "cusparselt": ("lib:libcusparseLt", "py:nvidia-cusparselt*"),
    "nccl": ("lib:libnccl", "py:nvidia-nccl*"),
    "nvshmem": ("lib:libnvshmem*", "py:nvidia-nvshmem*"),
    "aws-ofi-nccl": ("lib:libnccl-net*", "env:NCCL_NET_PLUGIN"),
    "hpc-x": ("lib:libhcoll", "env:HPCX_*"),
    "ucx": ("lib:libuc[mpst]", "env:UCX_*"),
    "ucc": ("lib:libucc",),
    "open mpi": ("lib:libmpi", "lib:libopen-*", "env:OMPI_*"),
    "transformer_engine": ("py:transformer-engine*",),
    "triton": ("py:triton", "py:pytorch-triton*"),
    "tensorrt": ("lib:libnvinfer*", "py:tensorrt*"),
    "dali": ("py:nvidia-dali*",),
}
# symptom -> the components that usually cause it, most likely first
SYMPTOMS: dict[str, tuple[str, ...]] = {
    "hang": ("nccl", "aws-ofi-nccl", "nvshmem", "hpc-x", "ucx", "ucc", "open mpi", "torch"),
    "numerics": ("cublas", "cudnn", "cudnn-frontend", "transformer_engine", "triton", "torch"),
    "slowdown": ("cublas", "cudnn", "triton", "nccl", "transformer_engine", "cuda", "torch"),
    "capture": ("torch", "transformer_engine", "cuda", "cudnn", "cublas", "nccl"),
    "crash": ("torch", "cuda", "cudnn", "cublas", "transformer_engine", "triton", "nccl"),
}


def units_of(component: str, units: Sequence[str]) -> list[str]:
    """The units of `units` that carry a component, in their given order."""
    patterns = UNITS.get(component, ()) + tuple(
        f"env:{name}" for name in COMPONENTS.get(component, ()) if name.isupper())
    return [u for u in units if any(fnmatchcase(u, p) for p in patterns)]


def suspects(units: Sequence[str], changed: Collection[str], symptom: str | None = None
             ) -> tuple[list[str], list[str]]:
    """(suspects, the rest): the units of components the configs show moved, those the
    symptom names first; every other unit after them, in its given order."""
    if symptom is not None and symptom not in SYMPTOMS:
        raise ValueError(f"no symptom {symptom!r}; known: {', '.join(SYMPTOMS)}")
    first = [c for c in SYMPTOMS.get(symptom or "", ()) if c in changed]
    order = first + [c for c in COMPONENTS if c in changed and c not in first]
    picked: list[str] = []
    for component in order:
        picked += [u for u in units_of(component, units) if u not in picked]
    return picked, [u for u in units if u not in picked]
