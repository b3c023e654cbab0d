"""What the options mean together: the checks that turn a bad combination into one
sentence and a hint, the checked Options of a command's click parameters, and `Asked`:
a whole bisect command line, typed, as `asked_options` hands it to a command."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Mapping

import click
from click.core import ParameterSource

from ..errors import UserError
from ..prebuilt.tiers import MAP_RULES
from .flags import default_cache, default_state
from .options import (ASKED, BISECT, BISECTION, BY_NAME, MEASURE, OPTIONS, RUN, BisectOptions,
                      MetricOptions, Options, RunOptions, options)


@dataclass(frozen=True)
class Asked:
    """A bisect command line, typed: the question (checked when first read), how each
    commit runs, how the bisection goes, --metric's settings, and which options were given
    rather than left at their defaults."""

    params: Mapping[str, Any]
    run: RunOptions
    bisect: BisectOptions
    measure: MetricOptions
    given: frozenset[str] = frozenset()

    @cached_property
    def question(self) -> Options:
        return options_from(dict(self.params))

    def with_question(self, **values: Any) -> "Asked":
        """The same command line with these question options set (probe's --commit)."""
        return replace(self, params={**self.params, **values})


def asked_from(params: Mapping[str, Any], given: frozenset[str] = frozenset()) -> Asked:
    def group(names: Mapping[str, Any], cls: Any) -> Any:
        return cls(**{n: params[n] for n in names if n in params})
    return Asked(params, group(RUN, RunOptions), group(BISECT, BisectOptions),
                 group(MEASURE, MetricOptions), given)


def asked_options(*groups: str) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """Add these groups of options to a command, and hand it one typed `Asked` (after the
    click context) instead of their values; the command's own options stay keywords."""
    def wrap(f: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(f)
        def callback(**values: Any) -> int:
            ctx = click.get_current_context()
            mine = {k: values.pop(k) for k in list(values)
                    if k in BY_NAME and BY_NAME[k].group in BISECTION}
            given = frozenset(k for k in mine if ctx.get_parameter_source(k)
                              is not ParameterSource.DEFAULT)
            return f(ctx, asked_from(mine, given), **values)
        return options(*groups)(callback)
    return wrap


def options_from(params: dict[str, Any]) -> Options:
    """The checked Options of a command's click parameters."""
    slurm = {o.into or o.name: params[o.name] for o in OPTIONS if o.group == "slurm"}
    slurm["sbatch_args"] = list(slurm["sbatch_args"])
    opts = Options(cache_dir=default_cache(params["cache_dir"]),
                   state=default_state(params["state"]), slurm=slurm,
                   **{n: params.get(n, o.default) for n, o in ASKED.items()})
    check(opts)
    return opts


def check(self: Options) -> None:
    _check_mode(self)
    if self.artifact_map not in MAP_RULES[:-1] and not (
            self.artifact_map.startswith("command:") and self.artifact_map[8:].strip()):
        raise UserError(f"unknown --artifact-map rule {self.artifact_map!r}",
                        hint=f"one of {', '.join(MAP_RULES)}")
    for name in self.key_env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UserError(f"--key-env {name!r} is not a variable name",
                            hint="give the name alone, e.g. --key-env LIMIT")
    for path in self.keep:
        if not path or path.startswith("/") or ".." in Path(path).parts or \
                not Path(path).parts or Path(path).parts[0] == ".git":
            raise UserError(f"--keep {path!r} must be a path inside the worktree",
                            hint="e.g. --keep build")
    rendered = {"--image": self.image, "--base-image": self.base_image,
                "--build-image": self.build_image,
                "--cuda-arch": self.cuda_arch, "--repro-args": self.repro_args,
                **{f"--{k.replace('_', '-')}": v for k, v in self.slurm.items()
                   if k != "shared_dir"}}
    for flag, value in rendered.items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and ("\n" in item or "\r" in item):
                raise UserError(f"{flag} must be one line",
                                hint="values are written into scripts; remove the newline")


def _check_mode(self: Options) -> None:
    if self.release_mode:
        if not (self.from_ and self.to):
            raise UserError("--from and --to go together",
                            hint="e.g. --from 24.09 --to 24.10")
        if self.old or self.new:
            raise UserError("use either --from/--to (releases) or --old/--new (revisions)",
                            hint="--from 24.09 --to 24.10, or --repo R --old A --new B")
    else:
        if not (self.old and self.new):
            raise UserError("say what to bisect: --old and --new, or --from and --to",
                            hint="e.g. --repo . --old v1.0 --new main, or --from 24.09 "
                                 "--to 24.10")
        if not self.test:
            raise UserError("--test is required outside release mode",
                            hint="a shell command whose exit code is the verdict "
                                 "(0 pass, 1-127 fail, 125 skip)")
    if self.backend_name == "docker" and not self.release_mode and not self.image:
        raise UserError("--backend docker needs --image for a generic recipe",
                        hint="name an image that has what --build and --test need")
    if "{version}" not in self.component_tag:
        raise UserError(f"--component-tag {self.component_tag!r} has no {{version}}",
                        hint="e.g. --component-tag 'release_v{version}'")
    if self.symptom and (not self.release_mode or self.no_images):
        raise UserError("--symptom orders release mode's component swaps, which compare its "
                        "images (--from/--to, without --no-images)",
                        hint="between two images, ask `bisect-ngc components --symptom ...`")
    if (self.component != "torch" or self.component_repo) and not self.release_mode:
        raise UserError("--component is for release mode (--from/--to)",
                        hint="outside it, --repo is the repository that is bisected")
    if self.rebuild and self.backend_name != "local":
        raise UserError("--rebuild is for the local backend",
                        hint=f"the {self.backend_name} backend keeps builds by their content "
                             "in the artifact store: `bisect-ngc cache prune` drops them")
    if self.with_ and self.backend_name == "local":
        raise UserError("--with needs a container: companions are built in the probe's "
                        "image", hint="pass --backend docker (or slurm with pyxis or "
                                      "enroot), or install the companion in --test yourself")
    if self.backend_name == "local" and self.release_mode and not (self.build and self.test):
        raise UserError("--backend local in release mode needs --build and --test",
                        hint="or use --backend docker for the PyTorch recipe")
