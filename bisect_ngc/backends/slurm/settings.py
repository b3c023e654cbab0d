"""The Slurm backend's own settings (its command-line options, see options.py), and
their checks."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ...errors import UserError

RUNTIMES = ("none", "pyxis", "enroot", "apptainer")
IMPORTS = ("registry", "dockerd")     # where enroot/pyxis import an image from

@dataclass
class SlurmSettings:
    partition: str | None = None          # builds (CPU); default: the cluster's default
    gpu_partition: str | None = None      # tests; default: --partition
    account: str | None = None
    qos: str | None = None
    time: str | None = None
    gpus_per_probe: int = 1
    sbatch_args: list[str] = field(default_factory=list)
    runtime: str = "none"
    container_import: str = "registry"
    image: str | None = None
    shared_dir: Path = Path(".")
    max_retries: int = 2
    same_node: bool = False               # tests after the first run on its node
    poll_min: float = 1.0
    poll_max: float = 30.0

    def check(self) -> None:
        if self.runtime not in RUNTIMES:
            raise UserError(f"unknown container runtime '{self.runtime}'",
                            hint=f"use one of {', '.join(RUNTIMES)}")
        if self.runtime != "none" and not self.image:
            raise UserError(f"--container-runtime {self.runtime} needs an image",
                            hint="pass --image (or use release mode, which picks one)")
        if self.container_import not in IMPORTS:
            raise UserError(f"unknown image source '{self.container_import}'",
                            hint=f"use one of {', '.join(IMPORTS)}")
