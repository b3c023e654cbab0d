"""`--component NAME` in release mode: bisect that component's commits between the
versions two releases ship. Everything else stays as the older image has it: each probe
builds the component at the commit inside that image (against its torch) and installs
the wheel over the image's own copy before the test.

A version names its commit by its local part (`2.6.0+c27ee60`, as NGC's TE builds do);
TE's comes from the catalog where known, else from the image. Other versions map to the
tag `v{version}`. Pure, but for `read_version`, which the caller supplies.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..companions.specs import (ALIASES, PRESETS, WHEEL_BUILD, Companion, Installed, build_script,
                                install_prelude)
from ..errors import UserError
from ..prebuilt.overlay import PRESETS as OVERLAY_PRESETS
from ..core.recipes import Recipe
from ..images.image_config import commit_in
from ..images.releases import IMAGE_RE, RELEASE_RE, Catalog, Endpoint

# (image, distribution) -> its version there, or None where it is not installed
VersionReader = Callable[[str, str], "str | None"]


def component_of(name: str, repo: str | None, max_jobs: int | None) -> Companion | None:
    """The component to bisect (None: PyTorch itself, the default), or a UserError."""
    key = ALIASES.get(name, name)
    if key == "torch":
        if repo:
            raise UserError("--component-repo is for a component other than torch",
                            hint="PyTorch's repository is --torch-repo")
        return None
    preset = PRESETS.get(key)
    if preset is None and not repo:
        raise UserError(f"--component {name} has no preset and no --component-repo",
                        hint=f"presets: torch, {', '.join(PRESETS)}; for any other, pass "
                             "--component-repo URL (and --build if `pip wheel` will not do)")
    env = (preset.env if preset else ()) + ((("MAX_JOBS", str(max_jobs)),) if max_jobs else ())
    url = repo or (preset.url if preset else "")       # one of them is there (above)
    return Companion(key, "git", url, build=preset.build if preset else
                     WHEEL_BUILD, env=env, submodules=bool(preset and preset.submodules),
                     module=preset.module if preset else key.replace("-", "_"))


def commit_of_version(version: str, tag: str = "v{version}") -> str:
    """The revision a version names: its local part's hash (`+c27ee60`, `+gc27ee60`),
    else `tag` with the public version put in (`v{version}`, `release_v{version}`)."""
    return commit_in(version) or tag.replace("{version}", version.partition("+")[0])


def endpoint(c: Companion, catalog: Catalog, spec: str, read_version: VersionReader,
             tag: str = "v{version}") -> Endpoint:
    """One end of the component's range: a release or image (its shipped version's
    commit), or a commit of the component's repository."""
    if RELEASE_RE.match(spec) or IMAGE_RE.match(spec):
        rel = catalog.get(spec) if RELEASE_RE.match(spec) else catalog.by_image(spec)
        image = rel.image if rel else spec
        if c.name == "transformer_engine" and rel is not None and rel.te_commit:
            return Endpoint(f"{spec} (TE {rel.transformer_engine})", "release", rel.te_commit,
                            rel, image)
        version = read_version(image, c.name)
        if not version:
            raise UserError(f"{image} has no {c.name} installed",
                            hint=f"check the name (--component {c.name}) against "
                                 f"`pip list` in the image")
        return Endpoint(f"{spec} ({c.name} {version})", "release" if rel else "image",
                        commit_of_version(version, tag), rel, image)
    return Endpoint(spec, "commit", spec)


def recipe(c: Companion, base: Recipe, test: str, build: str | None,
           overlay: list[str]) -> Recipe:
    """`base` (the older image's recipe) turned into the component's: the build makes
    its wheel from the worktree, the test installs it over the image's copy, imports
    it (a skip if it cannot), then runs `test` on the image's own torch. Overlays use
    `overlay` (--overlay-rule), else the component's preset rule where it has one."""
    c = replace(c, build=build) if build else c
    script = ('export BISECT_COMPANION_SRC="$BISECT_WORKTREE" '
              'BISECT_COMPANION_OUT="$BISECT_ARTIFACTS"\n' + build_script(c))
    return replace(base, build=script, build_image=None, build_dockerfile=None,
                   test=install_prelude([Installed(c, "$BISECT_ARTIFACTS")], test,
                                        probe_wheels=False),
                   test_as_is=test, expect_torch_commit=False, build_tree=False,
                   keep=[k for k in base.keep if k != "build"],
                   overlay=overlay or ([c.name] if c.name in OVERLAY_PRESETS
                                       else []),
                   subject=f"The failure (bisecting {c.name})", bisected=c.name)
