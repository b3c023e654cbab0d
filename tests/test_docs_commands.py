"""Every `bisect-ngc` command shown in docs/ and repro/README.md names a command and
options that exist, with values their types accept: each is parsed by the CLI's own
parser. Running them needs NGC images, GPUs, registries or clusters, which the docs say;
the README's commands are run for real (tests/test_readme.py)."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from bisect_ngc.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(ROOT.glob("docs/*.md")) + [ROOT / "repro" / "README.md"]
BLOCK = re.compile(r"^```\w*\n(.*?)^```", re.M | re.S)


def _shown(page: Path) -> list[str]:
    lines = []
    for block in BLOCK.findall(page.read_text()):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#\s.*$", "", line.strip())
            if line.startswith(("bisect-ngc ", ".venv/bin/bisect-ngc ")):
                lines.append(re.sub(r"\s*\[[^\]]*\]", "", line))   # [optional] parts
    return lines


COMMANDS = [(page.relative_to(ROOT).as_posix(), line) for page in PAGES for line in _shown(page)]


def test_the_docs_show_commands():
    assert len(COMMANDS) >= 10 and {p for p, _ in COMMANDS} >= {"docs/release-mode.md",
                                                                  "docs/components.md"}


@pytest.mark.parametrize("page,line", COMMANDS, ids=[f"{p}:{i}" for i, (p, _) in
                                                      enumerate(COMMANDS)])
def test_a_command_in_the_docs_parses(page, line):
    for shown in line.split(" ; "):
        args = shlex.split(shown)[1:]
        command: click.Command = cli
        while isinstance(command, click.Group) and args and not args[0].startswith("-"):
            name, args = args[0], args[1:]
            command = command.get_command(click.Context(cli), name)
            assert command is not None, f"{page}: no command {name!r} in {line!r}"
        try:
            command.make_context(command.name or "", list(args))
        except click.MissingParameter:
            pass                     # shown in part: e.g. --test left to the reader
        except click.exceptions.Exit:
            pass
        except click.UsageError as exc:
            pytest.fail(f"{page}: {line!r}: {exc.format_message()}")
