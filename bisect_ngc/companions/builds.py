"""Companions made ready for one probe (`--with`): git companions built against the
probed torch inside the probe's image, once per (companion commit, torch artifact, image
digest) in the artifact store; wheels and requirements as given. The container runner is
the backend's: this module knows what to run, not where."""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core.artifacts import ArtifactStore
from ..core.probes import ProbeFailed
from .sources import CheckoutFailed, CompanionSources
from .specs import Companion, Installed, build_script, placed
from ..core.keys import digest
from ..core.recipes import Mount
from ..core.search import Verdict
from ..core.verdicts import ProbeOutcome

# (image, command, mounts, env, log, timeout) -> (exit code, seconds, timed out)
Runner = Callable[[str, str, list[Mount], dict[str, str], Path, "float | None"],
                  "tuple[int | None, float, bool]"]


@dataclass
class Ready:
    """What a probe's test container needs for its companions."""

    installed: list[Installed]
    mounts: list[Mount]
    built: list[str]          # the companions built for this probe (not reused)


def companion_key(c: Companion, image: str, image_digest: str, torch_id: str) -> str:
    """A pure companion works with any torch; a compiled one belongs to one torch. The
    image counts by its digest alone (`repo@sha256:...` and `sha256:...` alike), so the
    Docker and Slurm backends share an artifact store's builds."""
    return ArtifactStore.key(c.commit, image, digest(
        ["companion", c.identity(), image_digest.rsplit("@", 1)[-1],
         torch_id if c.compiled else ""]))


def torch_identity(artifacts: str, artifact: Path, source_ref: str, image_digest: str) -> str:
    """Which torch a probe tests, as a companion's key counts it (one rule for every
    backend, so that they share builds): its build's store entry, the download or overlay
    it installs, or the image's own."""
    return {"build": artifact.name, "ready": source_ref,
            "none": f"image:{image_digest}"}[artifacts]


class CompanionBuilds:
    def __init__(self, companions: tuple[Companion, ...], artifacts: ArtifactStore,
                 sources: CompanionSources, timeout: float | None):
        self.companions, self.artifacts, self.sources = companions, artifacts, sources
        self.timeout = timeout

    def ready(self, image: str, image_digest: str, torch_id: str, log_dir: Path, run: Runner,
              on_build: Callable[[], None]) -> Ready | ProbeOutcome:
        """Every companion installable in a test container of `image` whose torch is
        `torch_id`; a skip where one cannot be built. `run` starts a container with the
        probe's own mounts (its torch at $BISECT_ARTIFACTS) plus the ones given."""
        ready = Ready(placed(self.companions), [], [])
        for item in ready.installed:
            c = item.companion
            if c.local_wheel:
                ready.mounts.append(Mount(c.local_wheel.parent, str(c.local_wheel.parent)))
            elif c.kind == "git":
                key = companion_key(c, image, image_digest, torch_id)
                art = self.artifacts.get(key)
                if art is None:
                    on_build()
                    failed = self._build(c, key, image, log_dir / f"companion-{c.name}.log",
                                         run)
                    if failed is not None:
                        return failed
                    ready.built.append(c.label)
                    art = self.artifacts.get(key)
                    if art is None:
                        raise ProbeFailed(f"the companion {c.label} was built but is not "
                                          "in the store")
                ready.mounts.append(Mount(art.path, item.inside))
        return ready

    def _build(self, c: Companion, key: str, image: str, log: Path,
               run: Runner) -> ProbeOutcome | None:
        """Build `c` into the store under `key`; a skip (with its reason) if it fails."""
        src = Path(tempfile.mkdtemp(prefix=f"companion-{c.name}-",
                                    dir=self.artifacts.root.parent))
        try:
            with self.artifacts.staging(key) as out:
                try:
                    self.sources.checkout(c, src / "src")
                except CheckoutFailed as exc:
                    return ProbeOutcome(Verdict.SKIP, str(exc), cacheable=False)
                env = {"BISECT_COMPANION_SRC": str(src / "src"), "BISECT_COMPANION_OUT": str(out),
                       "BISECT_OWNER": f"{os.getuid()}:{os.getgid()}"}
                mounts = [Mount(src, str(src), read_only=False),
                          Mount(out, str(out), read_only=False)]
                code, secs, timed_out = run(image, build_script(c), mounts, env, log,
                                            self.timeout)
                if timed_out or code != 0:
                    why = "timed out" if timed_out else f"exit {code}"
                    return ProbeOutcome(
                        Verdict.SKIP, f"companion {c.label} did not build against this "
                                      f"torch ({why}; see {log.name})",
                        exit_code=code, cacheable=not timed_out)
                self.artifacts.publish(key, out, {"companion": c.label, "image": image,
                                                  "build_s": secs})
        finally:
            shutil.rmtree(src, ignore_errors=True)
        return None
