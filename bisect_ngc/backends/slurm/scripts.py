"""The Slurm backend's batch scripts: the jinja environment with its shell-quoting and
mount filters (docker-style and enroot's fstab), and the controller job's script."""
from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import jinja2

from ...core.recipes import Mount

TEMPLATES = jinja2.Environment(loader=jinja2.PackageLoader("bisect_ngc", "templates"),
                          undefined=jinja2.StrictUndefined, trim_blocks=True,
                          lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
TEMPLATES.filters["q"] = lambda v: shlex.quote(str(v))
TEMPLATES.filters["mount"] = lambda m: f"{m.host}:{m.container}" + (":ro" if m.read_only else "")


def _fstab_field(path: object) -> str:
    """A path as one field of enroot's fstab line (octal escapes; `:` splits fields)."""
    return "".join(f"\\{ord(c):03o}" if c in "\\ \t\n:" else c for c in str(path))


# enroot creates the target inside the image (pyxis does that by itself).
TEMPLATES.filters["enroot_mount"] = lambda m: (
    f"{_fstab_field(m.host)}:{_fstab_field(m.container)}:none:x-create=dir,rbind"
    + (",ro" if m.read_only else ""))


def render_controller(**values: Any) -> str:
    return TEMPLATES.get_template("slurm-controller.sh.j2").render(**values)


def write_controller(s: Any, sid: str, argv: list[str], *, partition: str | None,
                     time_limit: str) -> Path:
    """The controller job's script for session `sid` (SlurmSettings `s`), written into the
    shared directory; its output goes next to it (.out)."""
    script = s.shared_dir / "controller" / f"{sid}.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(render_controller(
        name=f"bisect-ngc-controller-{sid}", partition=partition, account=s.account,
        qos=s.qos, time=time_limit, extra=s.sbatch_args, out=str(script.with_suffix(".out")),
        cwd=os.getcwd(), argv=shlex.join(argv)))
    return script


def round_mounts(worktrees: Any, tasks: list[dict[str, Any]], shared_dir: Path, runtime: str,
                 extra: list[Mount]) -> list[Mount]:
    """What every task of a round mounts; each task adds its worktree's own admin
    directory (tasks' `admin_mount`), read-write inside the read-only git directory."""
    for t in tasks:
        admin = worktrees.admin_dir(Path(t["worktree"]))
        mount = Mount(admin, str(admin), read_only=False) if admin else None
        t["admin_mount"] = "" if mount is None or runtime == "none" else \
            TEMPLATES.filters["enroot_mount" if runtime == "enroot" else "mount"](mount)
    return [Mount(shared_dir, str(shared_dir), read_only=False),
            Mount(worktrees.root, str(worktrees.root), read_only=False),
            *(Mount(d, str(d)) for d in worktrees.git_dirs()), *extra]
