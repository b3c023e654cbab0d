"""How an option is declared: an `Opt` (flags, click settings, group, its box in --help),
the typed fields that carry one (`flag_field`), and the defaults of the two places (state and
cache directories). options.py declares every option with these."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
PATH = click.Path(path_type=Path)


@dataclass(frozen=True)
class Opt:
    """One option. `group` says what it belongs to: question (what to bisect and how),
    slurm (SlurmSettings), place (state and cache directories), run (how rounds run),
    metric, or the one command that takes it. `replay`: repeated in command_line."""

    name: str
    flags: tuple[str, ...]
    group: str
    help: str
    into: str | None = None           # SlurmSettings' field, where its name differs
    replay: bool = True
    click: dict[str, Any] = field(default_factory=dict)
    section: str | None = None        # its box in --help (default: its group's, or Options)

    @property
    def box(self) -> str | None:
        return self.section or _GROUP_BOXES.get(self.group)

    @property
    def default(self) -> Any:
        if "default" in self.click:
            return self.click["default"]
        return False if self.click.get("is_flag") else () if self.click.get("multiple") else None

    def decorator(self, **override: Any) -> Callable[[F], F]:
        kw = {"help": self.help, **self.click, "default": self.default, **override}
        if kw.get("required"):      # click counts an explicit default of None as given
            kw.pop("default")
        return click.option(*self.flags, self.name, **kw)


# The boxes of --help, in order; an option's declaration names its box (or its group's).
WHAT, ROUNDS, RELEASE, CONTAINERS, METRIC, SLURM, PLACE = (
    "What to bisect", "How rounds run", "Two NGC releases (release mode)",
    "Containers and builds", "Metric (--metric)", "Slurm (--backend slurm)",
    "State and cache")
BOXES = (WHAT, ROUNDS, RELEASE, CONTAINERS, METRIC, SLURM, PLACE)
_GROUP_BOXES = {"metric": METRIC, "slurm": SLURM, "place": PLACE}


def opt(group: str, name: str, flags: str | tuple[str, ...], help: str, replay: bool = True,
       section: str | None = None, **kw: Any) -> Opt:
    return Opt(name, (flags,) if isinstance(flags, str) else flags, group, help,
               replay=replay, click=kw, section=section)


def flag_field(section: str | None, flags: str | tuple[str, ...], help: str, *,
         group: str = "question", replay: bool = True, **click: Any) -> Any:
    """A typed field that is also an option: its box in --help, flags, help, group and
    click settings in the field's metadata (the name is the field's)."""
    opt = Opt("", (flags,) if isinstance(flags, str) else flags, group, help,
              replay=replay, click=click, section=section)
    return field(default=opt.default, metadata={"opt": opt})


def declarations(cls: type) -> dict[str, Opt]:
    """The options a dataclass declares, by field name."""
    return {f.name: dataclasses.replace(f.metadata["opt"], name=f.name)
            for f in dataclasses.fields(cls) if "opt" in f.metadata}


def default_state(state: Path | None = None) -> Path:
    if state is None and os.environ.get("BISECT_NGC_STATE"):
        state = Path(os.environ["BISECT_NGC_STATE"])
    if state is None:
        state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") \
            / "bisect-ngc"
    return state.expanduser().resolve()


def default_cache(cache: Path | None = None) -> Path:
    if cache is None:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        cache = Path(os.environ.get("BISECT_NGC_CACHE") or base / "bisect-ngc")
    return cache.expanduser().resolve()
