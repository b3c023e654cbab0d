"""What an image's config says it holds, with no layer pulled: components and versions
read from its environment's `*_VERSION` variables and NVIDIA's `com.nvidia.*` labels, the
behaviour defaults its environment sets, and the difference between two images. Pure:
an OCI image config (the JSON blob a registry serves) in, facts out.

Every variable and label it understands is in COMPONENTS; any other `*_VERSION` variable
still shows, under its own name, so an image that is not NGC's diffs too. The forms are
those NGC's images write (tests/images/test_image_config.py): four-part CUDA versions, `+cuda12.2`
suffixes, torch's `2.5.0a0+b465a5843b` with 7 or 10 hex digits of the upstream commit,
`+git<hash>`, Transformer Engine's major.minor, `rc` with no separator, empty values."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Component:
    """How a component shows: the config's variables, then its labels, in the order they
    are trusted; and the inventory units that carry it in an image (attribution's swaps),
    besides those variables. Library units are named by the file's name before ".so"
    (libnccl, libcudnn_ops); distributions as PEP 503."""

    config: tuple[str, ...]
    units: tuple[str, ...] = ()


# The one table of the components this tool names.
COMPONENTS: dict[str, Component] = {
    "torch": Component(("PYTORCH_BUILD_VERSION", "PYTORCH_VERSION", "com.nvidia.pytorch.version"),
        ("py:torch",)),
    "ngc release": Component(("NVIDIA_PYTORCH_VERSION",)),
    "cuda": Component(("CUDA_VERSION",),
        ("lib:libcudart", "lib:libnvrtc*", "lib:libnvJitLink", "py:nvidia-cuda-*")),
    "cuda driver": Component(("CUDA_DRIVER_VERSION",)),
    "cublas": Component(("CUBLAS_VERSION", "com.nvidia.cublas.version"),
        ("lib:libcublas", "lib:libcublasLt", "py:nvidia-cublas*")),
    "cudnn": Component(("CUDNN_VERSION", "com.nvidia.cudnn.version"),
        ("lib:libcudnn", "lib:libcudnn_*", "py:nvidia-cudnn-cu*")),
    "cudnn-frontend": Component(("CUDNN_FRONTEND_VERSION",),
        ("py:nvidia-cudnn-frontend", "py:cudnn")),
    "cufft": Component(("CUFFT_VERSION", "com.nvidia.cufft.version"),
        ("lib:libcufft", "lib:libcufftw", "py:nvidia-cufft*")),
    "curand": Component(("CURAND_VERSION", "com.nvidia.curand.version"),
        ("lib:libcurand", "py:nvidia-curand*")),
    "cusolver": Component(("CUSOLVER_VERSION", "com.nvidia.cusolver.version"),
        ("lib:libcusolver", "lib:libcusolverMg", "py:nvidia-cusolver*")),
    "cusparse": Component(("CUSPARSE_VERSION", "com.nvidia.cusparse.version"),
        ("lib:libcusparse", "py:nvidia-cusparse-cu*")),
    "cusparselt": Component(("CUSPARSELT_VERSION", "com.nvidia.cusparselt.version"),
        ("lib:libcusparseLt", "py:nvidia-cusparselt*")),
    "cutensor": Component(("CUTENSOR_VERSION", "com.nvidia.cutensor.version")),
    "nccl": Component(("NCCL_VERSION", "com.nvidia.nccl.version"),
        ("lib:libnccl", "py:nvidia-nccl*")),
    "nvshmem": Component(("NVSHMEM_VERSION",), ("lib:libnvshmem*", "py:nvidia-nvshmem*")),
    "aws-ofi-nccl": Component(("AWS_OFI_NCCL_VERSION",),
        ("lib:libnccl-net*", "env:NCCL_NET_PLUGIN")),
    "hpc-x": Component(("HPCX_VERSION",), ("lib:libhcoll", "env:HPCX_*")),
    "ucx": Component(("OPENUCX_VERSION",), ("lib:libuc[mpst]", "env:UCX_*")),
    "ucc": Component(("OPENUCC_VERSION",), ("lib:libucc",)),
    "open mpi": Component(("OPENMPI_VERSION",), ("lib:libmpi", "lib:libopen-*", "env:OMPI_*")),
    "gdrcopy": Component(("GDRCOPY_VERSION",)),
    "transformer_engine": Component(("TRANSFORMER_ENGINE_VERSION",),
        ("py:transformer-engine*",)),
    "triton": Component(("PYTORCH_TRITON_VERSION",), ("py:triton", "py:pytorch-triton*")),
    "tensorrt": Component(("TRT_VERSION", "TENSORRT_VERSION", "com.nvidia.tensorrt.version"),
        ("lib:libnvinfer*", "py:tensorrt*")),
    "dali": Component(("DALI_VERSION",), ("py:nvidia-dali*",)),
    "nsight systems": Component(("NSIGHT_SYSTEMS_VERSION", "com.nvidia.nsightsystems.version")),
    "nsight compute": Component(("NSIGHT_COMPUTE_VERSION", "com.nvidia.nsightcompute.version")),
}
# Variables that change what the same code does, shown when they differ.
DEFAULTS = ("TORCH_CUDA_ARCH_LIST", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "CUDA_MODULE_LOADING",
            "TORCH_NCCL_USE_COMM_NONBLOCKING", "TORCH_CUDNN_V8_API_ENABLED",
            "NVIDIA_TF32_OVERRIDE", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
            "CUDA_BINARY_LOADER_THREAD_COUNT", "NCCL_NET_PLUGIN", "PIP_CONSTRAINT")
_KNOWN = {name for c in COMPONENTS.values() for name in c.config}
_LOCAL_COMMIT = re.compile(r"(?:git|g)?([0-9a-fA-F]{7,40})")
_DATE = re.compile(r"(19|20)\d\d(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])")


@dataclass(frozen=True)
class Fact:
    component: str
    version: str
    source: str          # "env CUDNN_VERSION" or "label com.nvidia.cudnn.version"

    @property
    def commit(self) -> str:
        return commit_in(self.version)


def commit_in(version: str) -> str:
    """The commit a version like 2.5.0a0+b465a5843b, 1.11.0+c27ee60, 3.4.0+gitc817b9b6 or
    0.1+gc27ee60 names (before any `.nv24.09`), or "". A date (+20240315) is no commit;
    other digits are (a short hash can be all digits). The one reader of versions'
    commits (torch, TE, companions)."""
    local = version.partition("+")[2].split(".")[0]
    match = _LOCAL_COMMIT.fullmatch(local)
    sha = match.group(1).lower() if match else ""
    return "" if _DATE.fullmatch(sha) else sha


@dataclass(frozen=True)
class Row:
    name: str            # a component, or a variable of DEFAULTS
    a: str               # "" where that image does not say
    b: str
    kind: str            # "component" | "default"


def environment(config: Mapping[str, Any]) -> dict[str, str]:
    """The image's environment variables; a config's `Env` is a list of NAME=VALUE."""
    body = config.get("config") or config.get("Config") or {}
    pairs = (item.partition("=") for item in body.get("Env") or [])
    return {name: value for name, _, value in pairs if name}


def labels(config: Mapping[str, Any]) -> dict[str, str]:
    body = config.get("config") or config.get("Config") or {}
    return dict(body.get("Labels") or {})


def facts(config: Mapping[str, Any]) -> dict[str, Fact]:
    """Each component the config names, by the first of its variables and labels that
    has a value; then every other `*_VERSION` variable under its own name."""
    env, tags = environment(config), labels(config)
    found: dict[str, Fact] = {}
    for component, entry in COMPONENTS.items():
        for name in entry.config:
            value = _clean((env if name.isupper() else tags).get(name))
            if value:
                kind = "env" if name.isupper() else "label"
                found[component] = Fact(component, value, f"{kind} {name}")
                break
    for name, value in sorted(env.items()):
        if name.endswith("_VERSION") and name not in _KNOWN and _clean(value):
            stem = name.removesuffix("_VERSION").removesuffix("_BUILD")
            component = stem.lower().replace("_", "-")
            found.setdefault(component, Fact(component, _clean(value), f"env {name}"))
    return found


def diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Row]:
    """What differs between two image configs: components in COMPONENTS' order (then the
    others by name), then the behaviour defaults."""
    fa, fb = facts(a), facts(b)
    order = [c for c in COMPONENTS if c in fa or c in fb] + \
        sorted((set(fa) | set(fb)) - set(COMPONENTS))
    rows = [Row(c, fa[c].version if c in fa else "", fb[c].version if c in fb else "",
                "component") for c in order]
    ea, eb = environment(a), environment(b)
    rows += [Row(name, ea.get(name, ""), eb.get(name, ""), "default") for name in DEFAULTS
             if name in ea or name in eb]
    return [r for r in rows if r.a != r.b]


def _clean(value: Any) -> str:
    """A value as written, without the quotes a Dockerfile may have kept; None is ""."""
    return str(value or "").strip().strip("'\"").strip()
