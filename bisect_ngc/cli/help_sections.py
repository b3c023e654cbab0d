"""`--help` in sections that follow the option table (rich-click draws them): what to
bisect first, then how rounds run, then release mode, containers, metric and Slurm."""
from __future__ import annotations

import click
import rich_click

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


# Sections of a question command, in order; an option not named here falls under its
# table group's section, and the rest under "Options".
_BY_NAME = {
    "What to bisect": ("repo", "old", "new", "test", "build", "commit", "key_env", "timeout",
                       "build_timeout", "keep", "no_clean", "no_submodules", "retry_skips",
                       "rebuild"),
    "How rounds run": ("jobs", "repeat", "repeat_policy", "verify", "max_skips", "no_descend",
                       "quiet", "dry_run", "as_json", "brief"),
    "Two NGC releases (release mode)": (
        "from_", "to", "torch_repo", "check_torch_commit", "component", "component_repo",
        "component_tag", "repro_args", "with_", "artifacts", "artifact_map",
        "artifact_store", "overlay_rule", "no_overlay", "no_images", "nightly_index",
        "nightly_urls", "no_nightlies"),
    "Containers and builds": ("backend", "image", "build_image", "base_image", "cuda_arch",
                              "max_jobs", "gpus", "build_tree"),
    "Slurm (--backend slurm)": ("controller_partition", "controller_time"),   # slurm submit's
}
_BY_GROUP = {"metric": "Metric (--metric)", "slurm": "Slurm (--backend slurm)",
             "place": "State and cache"}
_ORDER = ("What to bisect", "How rounds run", "Two NGC releases (release mode)",
          "Containers and builds", "Metric (--metric)", "Slurm (--backend slurm)",
          "State and cache")


def _section(name: str) -> str | None:
    for title, names in _BY_NAME.items():
        if name in names:
            return title
    opt = BY_NAME.get(name)
    return _BY_GROUP.get(opt.group) if opt else None


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
                {"name": t, "options": sections[t]} for t in _ORDER if t in sections]


def epilog(*parts: str) -> str:
    """Text after the options, its lines kept as written (see RichCommand)."""
    return "\n".join(p.replace("\b\n", "").rstrip() + "\n" for p in parts)
