"""`--help` in sections that follow the option table (rich-click draws them): what to
bisect first, then how rounds run, then release mode, containers, metric and Slurm."""
from __future__ import annotations

import click
import rich_click

from ..question.flags import BOXES
from ..question.options import BY_NAME


class _HelpNames:
    """-h is --help however the command is reached (directly, or through the group)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs["context_settings"] = {"help_option_names": ["-h", "--help"],
                                      **(kwargs.get("context_settings") or {})}
        super().__init__(*args, **kwargs)


class RichCommand(_HelpNames, rich_click.RichCommand):
    """A command whose epilog keeps its lines (rich-click rewraps a string); rich itself
    is loaded only when help is shown."""

    def format_epilog(self, ctx, formatter) -> None:
        if isinstance(self.epilog, str):
            from rich.text import Text
            self.epilog = Text(self.epilog)
        super().format_epilog(ctx, formatter)


class RichGroup(_HelpNames, rich_click.RichGroup):
    command_class = RichCommand


def _section(name: str) -> str | None:
    """An option's box, as its declaration says (options.py); None: the catch-all."""
    opt = BY_NAME.get(name)
    return opt.box if opt else None


def _commands(group: click.Group, path: str):
    for name, command in group.commands.items():
        yield f"{path} {name}", command
        if isinstance(command, click.Group):
            yield from _commands(command, f"{path} {name}")


def install(cli: click.Group, prog: str = "bisect-ngc") -> None:
    """Fill rich-click's option sections for every command of `cli`."""
    for path, command in _commands(cli, prog):
        sections: dict[str, list[str]] = {}
        for param in command.params:
            title = _section(param.name or "") if isinstance(param, click.Option) else None
            if title:
                sections.setdefault(title, []).append(param.opts[0])
        if sections:
            rich_click.rich_click.OPTION_GROUPS[path] = [
                {"name": t, "options": sections[t]} for t in BOXES if t in sections]


def epilog(*parts: str) -> str:
    """Text after the options, its lines kept as written (see RichCommand)."""
    return "\n".join(p.replace("\b\n", "").rstrip() + "\n" for p in parts)
