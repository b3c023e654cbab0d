"""What a probe builds and tests, independent of where it runs: the Recipe.

Every backend takes the same Recipe; its two keys (build and test) decide which cached
builds and verdicts may be reused. The PyTorch preset fills one in from the jinja2
templates in dockerfiles/: build a wheel inside the (older) NGC image, install it into a
fresh container of that image, and run the repro.
"""
from __future__ import annotations

import importlib.util
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from ..companions.specs import Companion, install_prelude, placed
from .host_inputs import host_inputs
from .keys import digest

REPRO_IN_CONTAINER = "/opt/bisect-ngc"
REPRO_SUBJECT = "The weak-ref capture failure"


@dataclass(frozen=True)
class Mount:
    """A host path seen inside a container (or a Slurm task) at `container`."""

    host: Path
    container: str
    read_only: bool = True


@dataclass
class Recipe:
    """How to build and test one commit; backends decide only where."""

    build: str | None
    test: str
    image: str | None = None                # the base image (tests run in it); None: no container
    build_image: str | None = None          # defaults to the base image
    build_dockerfile: str | None = None     # how to make build_image (legacy builder)
    env: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    build_settings: dict[str, Any] = field(default_factory=dict)
    build_tree: bool = False                # containers: a persistent build/ per slot
    clean: bool = True                      # local: `git clean -ffdx` between probes
    keep: list[str] = field(default_factory=lambda: ["build"])   # ...except these paths
    submodules: bool = True                 # update submodules at every checkout
    expect_torch_commit: bool = False       # the test's JSON must report the probed commit
    gpus: str = "auto"                      # containers: auto | all | none
    timeout: float | None = None            # seconds per test run
    build_timeout: float | None = None      # seconds per build
    subject: str = "The failure"            # the report's headline names what changed
    test_as_is: str | None = None           # the test in a prebuilt image (no build to use)
    overlay: list[str] = field(default_factory=list)   # overlay rule lines; [] = always build
    companions: tuple[Companion, ...] = ()  # --with: installed on every probe's torch
    bisected: str = "PyTorch"               # whose commits these are (--component), for words
    key_env: tuple[str, ...] = ()           # --key-env: variables keyed though not named

    def host(self, *commands: str | None) -> dict[str, Any]:
        """What the commands read from this host (host_inputs.py): their files always, the
        variables they name where they run on this host (no image), --key-env's always."""
        return host_inputs("\n".join(c for c in commands if c), environment=self.image is None,
                           key_env=self.key_env)

    def build_key(self) -> str:
        """Everything that decides what a build produces, the host files and variables
        the build command reads included."""
        host = self.host(self.build)
        return digest({"build": self.build, "build_image": self.build_image or self.image,
                       "settings": self.build_settings, "env": sorted(self.env.items()),
                       "clean": self.clean, "keep": sorted(self.keep),
                       "submodules": self.submodules, **({"host": host} if host else {})})

    def test_key(self) -> str:
        """Everything that decides a test's verdict, given the build: the files on this
        host that the test names count by their content, so an edit is a new test, and
        the variables it names by their values."""
        host = self.host(self.test, self.test_as_is)
        return digest({"test": self.test, "as_is": self.test_as_is, "image": self.image,
                       **({"host": host} if host else {}),
                       "timeout": self.timeout,
                       "expect_torch_commit": self.expect_torch_commit,
                       "env": sorted(self.env.items()),
                       **({"with": [c.identity() for c in self.companions]}
                          if self.companions else {})})

    def show(self) -> dict[str, Any]:
        """The recipe as plans and reports print it."""
        return {"base_image": self.image, "build_image": self.build_image or self.image,
                "build": self.build, "test": self.test,
                "build_dockerfile": self.build_dockerfile, "settings": self.build_settings,
                "env": self.env, "mounts": [f"{m.host}:{m.container}" for m in self.mounts],
                "expect_torch_commit": self.expect_torch_commit, "gpus": self.gpus,
                "timeout": self.timeout, "build_timeout": self.build_timeout,
                "overlay": self.overlay, "with": [c.label for c in self.companions],
                "test_with": install_prelude(placed(self.companions), self.test)
                if self.companions else None,
                "build_key": self.build_key()[:16], "test_key": self.test_key()[:16]}


# Commands that run the file named after them (their options aside).
_RUNNERS = {"sh", "bash", "zsh", "dash", "ksh", "source", ".", "python", "python3", "perl",
            "ruby", "node", "env", "exec", "time", "nohup", "timeout"}
# Of those, the ones whose next word is a command again (found on PATH, not a file).
_WRAPPERS = {"env", "exec", "time", "nohup", "timeout"}
_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "\n"}


def run_words(test: str) -> list[tuple[str, bool]]:
    """The words of a test command that name what it runs: each command's own word (True),
    and the first argument of a shell or an interpreter (False)."""
    try:
        lexer = shlex.shlex(test, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        words = test.split()
    found, runs_next, command, runner = [], True, True, False
    for word in words:
        if word in _SEPARATORS or set(word) <= set(";&|()"):
            runs_next, command, runner = True, True, False
            continue
        if set(word) <= set("<>&|") or (runs_next and "=" in word and
                                        not word.startswith(("/", "~", "$"))):
            continue                       # a redirection, or VAR=value before a command
        if runner and (word.startswith("-") or word.replace(".", "").isdigit()):
            runs_next = True               # a runner's option, or timeout's seconds
        elif runs_next:
            found.append((word, command))
            runner = os.path.basename(word) in _RUNNERS
            runs_next, command = runner, os.path.basename(word) in _WRAPPERS
    return found


def test_identity(test: str) -> Any:
    """The test as a cache key counts it (in a container: no host variables): its text,
    with the host files it names."""
    host = host_inputs(test, environment=False)
    return [test, host] if host else test


def _template_dirs() -> list[str]:
    """dockerfiles/ of a source checkout, or the installed bisect_ngc.dockerfiles."""
    dirs = [Path(__file__).resolve().parents[2] / "dockerfiles"]
    spec = importlib.util.find_spec("bisect_ngc.dockerfiles")
    if spec and spec.submodule_search_locations:
        dirs += [Path(p) for p in spec.submodule_search_locations]
    return [str(d) for d in dirs if d.is_dir()]


_env = jinja2.Environment(loader=jinja2.FileSystemLoader(_template_dirs()),
                          undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                          autoescape=False)
_env.filters["q"] = lambda value: shlex.quote(str(value))


def render(template: str, **values: Any) -> str:
    return _env.get_template(template).render(**values)


def repro_dir() -> Path:
    """The installed repro package: mounted into the containers, run on a host as
    `python -m repro`, and never imported by the tool."""
    spec = importlib.util.find_spec("repro")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the repro package is not installed next to bisect_ngc")
    return Path(list(spec.submodule_search_locations)[0])


def pytorch_preset(base_image: str, *, cuda_arch: str, max_jobs: int | None = None,
                   repro_args: list[str] | None = None, ccache_size: str = "50G",
                   extra_env: dict[str, str] | None = None, gpus: str = "all",
                   build_tree: bool = True) -> Recipe:
    """The PyTorch recipe, with the builder Dockerfile it needs. The test finds the repro
    at $BISECT_REPRO_PARENT, which a backend sets only where it cannot mount it."""
    settings = {"cuda_arch": cuda_arch, "max_jobs": max_jobs or os.cpu_count() or 1,
                "ccache_size": ccache_size, "extra_env": sorted((extra_env or {}).items())}
    build = render("pytorch-build.sh.j2", base_image=base_image, **settings)
    test, as_is = (render("pytorch-test.sh.j2", base_image=base_image, install=install,
                          repro_parent=REPRO_IN_CONTAINER,
                          repro_args=shlex.join(repro_args or []))
                   for install in (True, False))
    dockerfile = render("builder.Dockerfile.j2", base_image=base_image,
                        recipe_hash=digest([build, settings])[:16])
    return Recipe(
        image=base_image, build=build, test=test, test_as_is=as_is,
        build_image=f"bisect-ngc/builder:{digest(dockerfile)[:12]}", build_dockerfile=dockerfile,
        mounts=[Mount(repro_dir(), f"{REPRO_IN_CONTAINER}/repro")],
        build_settings={k: v for k, v in settings.items() if k != "ccache_size"},
        build_tree=build_tree, expect_torch_commit=True, gpus=gpus, subject=REPRO_SUBJECT,
        overlay=["pytorch"])
