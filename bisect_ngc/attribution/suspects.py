"""Which differing components to suspect first. Pure (its one import is the table of
components, images/image_config.py, which says how each shows in a config and in an
image).

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

from ..images.image_config import COMPONENTS

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
    entry = COMPONENTS.get(component)
    patterns = entry.units + tuple(f"env:{n}" for n in entry.config if n.isupper()) \
        if entry else ()
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
