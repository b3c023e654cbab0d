"""Companions: the user's own layer, installed on top of every probe's torch (`--with`).

A SPEC is one of
- a wheel: a path or URL ending in `.whl`, installed as it is;
- a pip requirement (`megatron-core==0.9.0`), installed without its dependencies;
- a git repository at a revision, `git+URL@REV`, built by `pip wheel` (or by the command
  after `#build=`) inside the probe's base image against the probed torch;
- a preset at a revision, `transformer_engine@REV` or `megatron-core@REV`.

A companion with compiled parts is rebuilt for every probed torch: its build is keyed by
(its commit, the torch artifact, the base image digest). A companion that does not build
or import is a skip with its reason, never a verdict. Pure: parsing and rendering only.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

COMPANIONS_IN_CONTAINER = "/opt/bisect-ngc/companions"
WHEEL_BUILD = 'pip wheel --no-build-isolation --no-deps -w "$BISECT_COMPANION_OUT" .'
_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?"
                          r"\s*((===|==|~=|!=|>=|<=|<|>)\s*[A-Za-z0-9.*+!_-]+\s*,?\s*)*$")
_REV = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")


@dataclass(frozen=True)
class Companion:
    name: str                     # the distribution (or preset) name
    kind: str                     # wheel | pip | git
    source: str                   # the wheel's path or URL, the requirement, the git URL
    rev: str = ""                 # git: the revision as given
    commit: str = ""              # git: the commit it resolved to
    build: str = WHEEL_BUILD     # git: writes wheels into $BISECT_COMPANION_OUT
    env: tuple[tuple[str, str], ...] = ()
    submodules: bool = False
    module: str = ""              # imported after installing: it must load with this torch
    compiled: bool = True         # rebuilt for every probed torch
    content: str = ""             # wheel: what its bytes are (sha256, or a URL's size+ETag)

    @property
    def label(self) -> str:
        if self.kind != "git":
            return self.source
        return f"{self.name}@{(self.commit or self.rev)[:12]}" if self.commit or self.rev \
            else self.name

    @property
    def local_wheel(self) -> Path | None:
        """A wheel on this filesystem (containers mount its directory), or None."""
        return Path(self.source).resolve() if self.kind == "wheel" and "://" not in self.source \
            else None

    def identity(self) -> list:
        """What decides what this companion is, for cache keys."""
        return [self.name, self.kind, self.source, self.commit or self.rev, self.build,
                sorted(self.env), self.submodules, self.module, self.compiled,
                *([self.content] if self.content else [])]


@dataclass(frozen=True)
class Preset:
    url: str
    module: str
    env: tuple[tuple[str, str], ...] = ()
    submodules: bool = False
    compiled: bool = True
    build: str = WHEEL_BUILD


PRESETS = {
    # TE's PyTorch extension compiles against torch's headers: rebuilt for every torch.
    "transformer_engine": Preset(
        "https://github.com/NVIDIA/TransformerEngine.git", "transformer_engine.pytorch",
        env=(("NVTE_FRAMEWORK", "pytorch"),), submodules=True),
    "megatron-core": Preset("https://github.com/NVIDIA/Megatron-LM.git", "megatron.core",
                            compiled=False),
}
ALIASES = {"te": "transformer_engine", "transformer-engine": "transformer_engine",
            "megatron_core": "megatron-core", "mcore": "megatron-core"}

FORMS = ("a wheel (path or URL ending in .whl), a pip requirement (name==version), "
         "git+URL@REV (optionally #build=COMMAND), or a preset at a revision "
         f"({', '.join(f'{p}@REV' for p in PRESETS)})")


def parse(spec: str, max_jobs: int | None = None) -> Companion:
    """One --with SPEC, or a UserError that lists the forms."""
    text = spec.strip()
    name, at, rev = text.partition("@")
    preset = ALIASES.get(name, name)
    if at and preset in PRESETS:
        p = PRESETS[preset]
        env = p.env + ((("MAX_JOBS", str(max_jobs)),) if max_jobs else ())
        return Companion(preset, "git", p.url, _rev(rev, spec), build=p.build, env=env,
                         submodules=p.submodules, module=p.module, compiled=p.compiled)
    if text.startswith("git+"):
        url, _, fragment = text[4:].partition("#")
        url, at, rev = url.rpartition("@") if "@" in url.split("/")[-1] else (url, "", "")
        if not at or not url:
            raise UserError(f"--with {spec}: a git companion needs a revision",
                            hint="write git+URL@REV, e.g. git+https://github.com/org/pkg@v1.2")
        build = fragment[len("build="):] if fragment.startswith("build=") else WHEEL_BUILD
        if fragment and not fragment.startswith("build="):
            raise UserError(f"--with {spec}: unknown fragment '#{fragment}'",
                            hint="the only fragment is #build=COMMAND")
        stem = url.rstrip("/").split("/")[-1].removesuffix(".git")
        return Companion(stem.replace("-", "_"), "git", url, _rev(rev, spec), build=build,
                         module=stem.replace("-", "_"))
    if text.partition("#")[0].endswith(".whl"):
        stem = text.partition("#")[0].rsplit("/", 1)[-1].split("-")[0]
        return Companion(stem, "wheel", text, module=_module_of(stem))
    if at and name and not any(c in name for c in "/:"):
        raise UserError(f"--with {spec}: '{name}' is not a preset",
                        hint=f"presets: {', '.join(PRESETS)}; any other repository is "
                             f"git+URL@REV")
    if _REQUIREMENT.match(text):
        dist = re.split(r"[\[=<>!~ ]", text, maxsplit=1)[0]
        return Companion(dist, "pip", text, module=_module_of(dist), compiled=False)
    raise UserError(f"--with {spec}: not a companion SPEC", hint=f"use {FORMS}")


def _module_of(dist: str) -> str:
    """What to import to know a distribution loads: a preset's module (TE's PyTorch
    extension, not just its package), else the distribution's own name."""
    key = dist.lower().replace("-", "_")
    preset = PRESETS.get(ALIASES.get(dist.lower(), ALIASES.get(key, key)))
    return preset.module if preset else key


def _rev(rev: str, spec: str) -> str:
    if not rev or not _REV.match(rev) or ".." in rev:
        raise UserError(f"--with {spec}: '{rev}' is not a revision",
                        hint="give a commit, tag or branch after @")
    return rev


@dataclass(frozen=True)
class Installed:
    """A companion as a test container sees it: its wheels' directory inside (git and
    wheel companions) or nothing to mount (a pip requirement)."""

    companion: Companion
    inside: str = ""               # a directory of wheels, or a wheel file


def placed(companions: tuple[Companion, ...],
           git_dir: str = COMPANIONS_IN_CONTAINER + "/{}") -> list[Installed]:
    """Where a test container finds each companion: git companions' wheels in a directory
    of their own (`git_dir` with the index), a local wheel at its own path, the rest as
    given."""
    out = []
    for i, c in enumerate(companions):
        inside = git_dir.format(i) if c.kind == "git" else str(c.local_wheel or c.source)
        out.append(Installed(c, inside))
    return out


def install_prelude(installed: list[Installed], test: str, probe_wheels: bool = True) -> str:
    """The test, after installing the probed torch's wheel (if the probe has one and
    `probe_wheels`) and then each companion, and importing each: a companion that does
    not install or load is a skip (exit 125) whose reason is the JSON line it prints."""
    lines = ["export PIP_BREAK_SYSTEM_PACKAGES=1 PIP_CONSTRAINT=",
             "skip() { python3 -c 'import json, sys; print(json.dumps({\"skip_reason\": "
             "sys.argv[1][:400]}))' \"$1\"; exit 125; }"]
    if probe_wheels:
        lines += ['for w in "$BISECT_ARTIFACTS"/*.whl; do [ -e "$w" ] || continue',
                  '  pip install -q --no-deps --force-reinstall --no-index "$w" >&2 '
                  '|| skip "could not install the probed wheel $(basename "$w")"',
                  '  export BISECT_TORCH_INSTALLED=1',
                  "done"]
    for item in installed:
        c = item.companion
        inside = f'"{item.inside}"' if item.inside.startswith("$") else shlex.quote(item.inside)
        what = f"{inside}/*.whl" if item.inside and c.kind == "git" else \
            shlex.quote(item.inside or c.source)
        lines.append(f"pip install -q --no-deps --force-reinstall {what} >&2 || "
                     f"skip {shlex.quote(f'companion {c.label} did not install')}")
        if c.module:
            hint = "" if c.kind == "git" and c.compiled else \
                " (a wheel built once does not follow the probed torch: pass git+URL@REV to " \
                "rebuild it for each)"
            check = f"import {c.module}"
            lines.append(f"why=$(python3 -c {shlex.quote(check)} 2>&1) || skip "
                         f"\"companion {c.label} does not import with this torch: "
                         f"$(printf %s \"$why\" | tail -n 1){hint}\"")
    lines.append(f"exec /bin/sh -c {shlex.quote(test)}")
    return "\n".join(lines) + "\n"


def build_script(c: Companion) -> str:
    """The companion's build, in the probe's base image: the probed torch installed first
    (its wheel from $BISECT_ARTIFACTS, where it has one), then the build command in a
    fresh checkout ($BISECT_COMPANION_SRC), writing wheels to $BISECT_COMPANION_OUT."""
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in c.env)
    return ("set -e\nexport PIP_BREAK_SYSTEM_PACKAGES=1 PIP_CONSTRAINT=\n"
            "trap 'chown -R \"${BISECT_OWNER:-0:0}\" \"$BISECT_COMPANION_OUT\" "
            "\"$BISECT_COMPANION_SRC\" 2>/dev/null || true' EXIT\n" + exports +
            'for w in "$BISECT_ARTIFACTS"/*.whl; do [ -e "$w" ] || continue\n'
            '  pip install -q --no-deps --force-reinstall --no-index "$w"\ndone\n'
            'cd "$BISECT_COMPANION_SRC"\n' + c.build + "\n"
            'ls "$BISECT_COMPANION_OUT"/*.whl >/dev/null 2>&1 || '
            '{ echo "bisect-ngc: the build left no wheel in $BISECT_COMPANION_OUT" >&2; exit 1; }\n')

