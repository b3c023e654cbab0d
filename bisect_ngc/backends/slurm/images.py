"""Images for enroot and pyxis on Slurm: one squashfs per image digest in the shared
directory, imported from the registry or from this host's Docker engine."""
from __future__ import annotations

import re
from pathlib import Path

from ...errors import UserError


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
