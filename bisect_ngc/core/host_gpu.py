"""This host's first GPU as nvidia-smi reports it: the compute capability a wheel is built
for, and the clocks a metric run is recorded with. Nothing is reported without nvidia-smi."""
from __future__ import annotations

import shutil
import subprocess

CLOCK_FIELDS = ("name", "clocks.sm", "clocks.mem", "clocks.max.sm", "temperature.gpu")


def query(fields: tuple[str, ...]) -> list[str]:
    """The values of `fields` for GPU 0, or [] when nvidia-smi is absent or says nothing."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        done = subprocess.run([smi, f"--query-gpu={','.join(fields)}",
                               "--format=csv,noheader,nounits", "--id=0"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    out = done.stdout.strip() if done.returncode == 0 else ""    # no driver, no GPU
    values = [v.strip() for v in out.splitlines()[0].split(",")] if out else []
    return values if len(values) == len(fields) else []


def compute_capability() -> str | None:
    """e.g. '9.0' for an H100 or H200."""
    return next(iter(query(("compute_cap",))), None)


def clocks() -> dict[str, str]:
    return dict(zip(CLOCK_FIELDS, query(CLOCK_FIELDS)))
