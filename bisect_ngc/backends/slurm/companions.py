"""--with on Slurm: each task's companions, prepared by the controller and built by the
round's build array after the torch build, into the shared artifact store.

The controller checks out each git companion that its store entry lacks into the shared
directory (the nodes need no network or mirror). A build task builds it in the image,
against the torch it just built or reused, and publishes it by a rename, as it does the
torch wheel. A test task finds each companion at $BISECT_COMPANION_<j> (the shared
directory is mounted everywhere); one that did not build makes the probe a skip.
"""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from ...core.artifacts import ArtifactStore
from ...companions.builds import companion_key
from ...companions.sources import CheckoutFailed, CompanionSources
from ...companions.specs import Companion, build_script, install_prelude, placed
from ...core.recipes import Mount

BUILD_ENV = ("BISECT_COMPANION_SRC", "BISECT_COMPANION_OUT", "BISECT_OWNER")


def env_names(companions: tuple[Companion, ...]) -> list[str]:
    """The variables a test container must be given (enroot passes only those named)."""
    return [f"BISECT_COMPANION_{j}" for j in range(len(companions))]


def test_command(companions: tuple[Companion, ...], test: str) -> str:
    return install_prelude(placed(companions, "$BISECT_COMPANION_{}"), test)


def wheel_mounts(companions: tuple[Companion, ...]) -> list[Mount]:
    """Local wheels, seen where they are (a shared filesystem, as on the cluster)."""
    return [Mount(c.local_wheel.parent, str(c.local_wheel.parent))
            for c in companions if c.local_wheel]


def builds(companions: tuple[Companion, ...]) -> list[dict[str, str]]:
    """Per companion: its label and its build script, shell-quoted for the template."""
    return [{"label": c.label, "script": shlex.quote(build_script(c))} for c in companions]


def prepare(companions: tuple[Companion, ...], artifacts: ArtifactStore,
            sources: CompanionSources, shared_dir: Path, image: str, image_digest: str,
            torch_id: str) -> list[dict[str, str]] | str:
    """Per companion, for one task: where its build goes (final, staging) and its fresh
    source ("" where nothing is to be built); or why the task is a skip."""
    out = []
    for c in companions:
        if c.kind != "git":
            out.append({"final": "", "staging": "", "src": ""})
            continue
        key = companion_key(c, image, image_digest, torch_id)
        final = artifacts.path(key)
        src = shared_dir / "companion-src" / key
        if not (final / "meta.json").exists() and not (src / ".git").exists():
            try:
                sources.checkout(c, src)
            except CheckoutFailed as exc:
                return str(exc)
        out.append({"final": str(final), "staging": str(artifacts.root / ".staging" / key),
                    "src": "" if (final / "meta.json").exists() else str(src)})
    return out


def failed(data: dict[str, Any], labels: list[str], rdir: Path, n: int) -> str:
    """The reason of a task whose companion did not build ("" if none failed)."""
    j = data.get("companion_failed")
    if j is None:
        return ""
    code = (data.get("companion") or {}).get("exit_code")
    return (f"companion {labels[j]} did not build against this torch (exit {code}; see "
            f"{rdir / f'companion-{n}-{j}.log'})")

