"""Images for enroot and pyxis on Slurm: one squashfs per image digest in the shared
directory, imported from the registry or from this host's Docker engine, by the tasks that
need it or by a job ahead of their round."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Sequence

from ...errors import UserError
from .scripts import TEMPLATES


class SquashfsImages:
    def __init__(self, shared_dir: Path, source: str):
        self.shared_dir = shared_dir
        self.source = source            # registry | dockerd
        self._digests: dict[str, str] = {}

    def locate(self, image: str) -> tuple[str, Path, str]:
        """(enroot import URI, the squashfs in the shared directory, the image digest) for
        enroot and pyxis: one squashfs per digest, shared by rounds and sessions. A
        registry image is known by its digest only when pinned (`name@sha256:...`);
        otherwise its tag names the file."""
        if self.source == "dockerd":
            uri, found = f"dockerd://{image}", self._dockerd_digest(image)
        else:
            uri, found = f"docker://{image}", image.split("@", 1)[1] if "@" in image else ""
        name = re.sub(r"[^A-Za-z0-9._-]", "+", image.split("@", 1)[0])
        version = found.split(":")[-1][:16] if found else "tag"
        return uri, self.shared_dir / "enroot" / f"{name}@{version}.sqsh", found

    def _dockerd_digest(self, image: str) -> str:
        if image not in self._digests:
            try:
                import docker
                self._digests[image] = docker.from_env(timeout=20).images.get(image).id
            except Exception as exc:  # noqa: BLE001 - any engine error means the same here
                raise UserError(f"--container-import dockerd: this host's Docker engine "
                                f"cannot give {image} ({exc.__class__.__name__})",
                                hint=f"start Docker and `docker pull {image}`, or import from "
                                     "the registry (--container-import registry)") from None
        return self._digests[image]


class ImportAhead:
    """The images the next round may need, imported by one CPU job while this round runs
    (the Backend protocol's prefetch). The job takes the lock the round's tasks take, so a
    task that needs an image under way waits for it instead of importing it again."""

    def __init__(self, settings: Any, sched: Any, images: SquashfsImages,
                 say: Callable[[str], None]):
        self.s, self.sched, self.images, self.say = settings, sched, images, say
        self.jobs: list[str] = []       # every import job submitted and not yet cancelled
        self.tag = ""                   # names this session's import jobs

    def submit(self, images: Sequence[str], tag: str) -> None:
        """A new list: jobs that have not started go; a job under way may finish."""
        self.drop(only_pending=True)
        self.tag = tag
        wanted = []
        for image in images:
            try:
                uri, sqsh, _ = self.images.locate(image)
            except UserError:
                continue                  # the round that needs it says why
            if not sqsh.exists():
                wanted.append((str(sqsh), uri))
        if wanted:
            try:
                job = self._submit(wanted, tag)
            except (UserError, OSError) as exc:
                self.say(f"could not import the next round's images ahead ({exc}); each "
                         "task imports its own")
                return
            self.jobs.append(job)
            self.say(f"importing {len(wanted)} image(s) the next round may need, in job {job}")

    def _submit(self, wanted: list[tuple[str, str]], tag: str) -> str:
        where = self.s.shared_dir / "imports"
        where.mkdir(parents=True, exist_ok=True)
        script = where / f"{tag}-{len(list(where.glob('*.sh')))}.sh"
        script.write_text(TEMPLATES.get_template("slurm-import.sh.j2").render(
            name=f"bisect-ngc-import-{tag}", partition=self.s.partition or "",
            account=self.s.account, qos=self.s.qos, time=self.s.time, extra=self.s.sbatch_args,
            out=str(script.with_suffix(".out")), images=wanted))
        out = self.sched.run(["sbatch", "--parsable", str(script)], what="sbatch")
        return out.strip().split(";")[0]

    def drop(self, only_pending: bool = False) -> None:
        """Cancel the jobs (with only_pending, those that have not started: one scancel,
        so none starts between a look at the queue and the cancel)."""
        if self.jobs:
            states = ["--state=PENDING"] if only_pending else []
            self.sched.run(["scancel", *states, *self.jobs], what="scancel", may_fail=True)
        if not only_pending and self.tag:      # one submitted as Ctrl-C came, by its name
            self.sched.run(["scancel", f"--name=bisect-ngc-import-{self.tag}"],
                           what="scancel", may_fail=True)
        if not only_pending:
            self.jobs = []
