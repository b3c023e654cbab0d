"""The Containers protocol (core/probes.py) on Slurm: each inventory, extraction and swap
probe is a test-only batch job that runs one command in the image through pyxis or enroot,
from the image's squashfs in the shared directory. The swaps' files live in the shared
directory too (`work_dir`), so the nodes see what the controller linked."""
from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path
from typing import Callable

from ...attribution.components import ScriptsByShell
from ...errors import UserError
from ...core.recipes import Mount
from .images import SquashfsImages
from .queue import Scheduler
from .scripts import TEMPLATES
from .settings import SlurmSettings

# A job that left the queue this long ago without its result file ended without one.
_RESULT_GRACE_S = 10.0


class SlurmContainers(ScriptsByShell):
    def __init__(self, settings: SlurmSettings, sched: Scheduler, images: SquashfsImages,
                 say: Callable[[str], None]):
        if settings.runtime not in ("pyxis", "enroot"):
            raise UserError(f"swap probes on Slurm need enroot or pyxis, not "
                            f"--container-runtime {settings.runtime}",
                            hint="pass --container-runtime pyxis (or enroot)")
        self.s, self.sched, self.images, self.say = settings, sched, images, say
        self.work_dir = settings.shared_dir / "components"
        self._env: dict[str, list[str]] = {}

    def digest(self, image: str) -> str:
        uri, sqsh, found = self.images.locate(image)
        return found or sqsh.name

    def config_env(self, image: str) -> list[str]:
        """The image's variables as enroot set them up: its /etc/environment."""
        if image not in self._env:
            code, out = self.output(image, "cat /etc/environment", {}, [])
            self._env[image] = [line for line in out.splitlines() if "=" in line] \
                if code == 0 else []
        return self._env[image]

    def output(self, image: str, command: str, env: dict[str, str],
               mounts: list[tuple[Path, str, bool]]) -> tuple[int | None, str]:
        """One job: the command's exit code (None: the job ended without one) and its
        standard output."""
        job_dir = self.s.shared_dir / "swap-jobs" / uuid.uuid4().hex[:12]
        job_dir.mkdir(parents=True)
        uri, sqsh, _ = self.images.locate(image)
        script = TEMPLATES.get_template("slurm-swap.sh.j2").render(
            name="bisect-ngc-swap", partition=self.s.gpu_partition or self.s.partition or "",
            account=self.s.account, qos=self.s.qos, time=self.s.time, extra=self.s.sbatch_args,
            out=str(job_dir / "slurm.out"), gpus=self.s.gpus_per_probe, job_dir=str(job_dir),
            env=sorted(env.items()), runtime=self.s.runtime, image=image, sqsh=str(sqsh),
            import_uri=uri, cmd=command,
            mounts=[Mount(job_dir, str(job_dir), read_only=False),
                    *(Mount(host, inside, ro) for host, inside, ro in mounts)])
        (job_dir / "job.sh").write_text(script)
        job = self.sched.run(["sbatch", "--parsable", str(job_dir / "job.sh")],
                             what="sbatch").strip().split(";")[0]
        try:
            code = self._wait(job, job_dir / "result.json")
        except BaseException:
            self.sched.run(["scancel", job], what="scancel", may_fail=True)
            raise
        out = (job_dir / "stdout").read_text(errors="replace") \
            if (job_dir / "stdout").exists() else ""
        if code is None:
            self.say(f"  swap job {job} ended without a result: see {job_dir / 'slurm.out'}")
        else:
            shutil.rmtree(job_dir, ignore_errors=True)
        return code, out

    def _wait(self, job: str, result: Path) -> int | None:
        delay, gone_at = self.s.poll_min, None
        while not result.exists():
            states = self.sched.queue({job})
            if job in states or f"{job}_0" in states:
                gone_at = None
            else:
                gone_at = gone_at or time.monotonic()
                if time.monotonic() - gone_at > _RESULT_GRACE_S:
                    return None
            time.sleep(delay)
            delay = min(delay * 1.5, self.s.poll_max)
        return int(json.loads(result.read_text())["code"])
