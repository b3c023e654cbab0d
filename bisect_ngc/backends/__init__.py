"""The executors, by name. Each is imported only when asked for, so `--backend local`
never loads the Docker SDK. The interface they share lives in `base.py`."""
from __future__ import annotations

import importlib
from typing import Callable

from ..errors import UserError
from ..core.probes import Backend, BackendSetup

BACKENDS = {
    "local": ("bisect_ngc.backends.local", "LocalBackend"),
    "docker": ("bisect_ngc.backends.docker.backend", "DockerBackend"),
    "slurm": ("bisect_ngc.backends.slurm.backend", "SlurmBackend"),
}


def create(name: str, setup: BackendSetup) -> Backend:
    if name not in BACKENDS:
        raise UserError(f"unknown backend '{name}'", hint=f"use one of {', '.join(BACKENDS)}")
    module, cls = BACKENDS[name]
    return getattr(importlib.import_module(module), cls).create(setup)


# A backend's own options, in a module light enough to import at start-up (options.py
# shows their defaults); the backend itself still loads only when asked for.
SETTINGS = {"slurm": ("bisect_ngc.backends.slurm.settings", "SlurmSettings")}


def settings_type(name: str) -> type:
    module, cls = SETTINGS[name]
    return getattr(importlib.import_module(module), cls)


def version_reader(say: Callable[[str], None]) -> Callable[[str, str], str | None]:
    """(image, distribution) -> the version that image ships, read by running it on this
    host's Docker engine (the SDK loads on the first read)."""
    def read(image: str, dist: str) -> str | None:
        from .docker.engine import distribution_version
        return distribution_version(image, dist, say)
    return read
