"""The words a user reads, pinned: `--help` of every command, the one-sentence errors and
`plan --brief`. A changed word fails with a diff; after a change on purpose, regenerate
with `pytest tests/cli/test_help.py --snapshot-update` and read the diff."""
from __future__ import annotations

import click
import pytest

from bisect_ngc.cli.main import cli

from tests.lib.repos import BUILD, TEST, make_repo


def _commands(group: click.Group, path: tuple[str, ...] = ()):
    for name, command in sorted(group.commands.items()):
        yield (*path, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


@pytest.fixture(autouse=True)
def _fixed_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("TERM", "dumb")


@pytest.mark.parametrize("command", [" ".join(c) for c in _commands(cli)] + [""])
def test_help_text(run_cli, snapshot, command):
    code, out, _ = run_cli([*command.split(), "--help"])
    assert code == 0 and out == snapshot


ERRORS = [
    ["bisect", "--repo", "{tmp}/nowhere", "--old", "a", "--new", "b", "--test", "true"],
    ["bisect", "--repo", "{tmp}/r", "--old", "no-such-rev", "--new", "main", "--test", "true"],
    ["bisect", "--repo", "{tmp}/r", "--old", "main~3", "--new", "main"],
    ["bisect", "--repo", "{tmp}/r", "--old", "main~3", "--new", "main", "--test", "true",
     "--metric", "t", "--jobs", "2"],
    ["bisect", "--from", "19.01", "--to", "24.10"],
    ["probe", "--repo", "{tmp}/r", "--test", "true"],
    ["components", "--to", "24.10", "--test", "true"],
    ["report", "--session", "nope"],
    ["diff", "24.09", "debian:12"],
    ["diff", "99.99", "24.10"],
]


@pytest.mark.parametrize("args", ERRORS, ids=[" ".join(a[:1] + a[-2:]) for a in ERRORS])
def test_one_sentence_errors(tmp_path, run_cli, snapshot, args):
    make_repo(tmp_path / "r", 5, 2)
    args = [a.format(tmp=tmp_path) for a in args]
    args += ["--state", str(tmp_path / "st")] if args[0] != "diff" else \
        ["--cache-dir", str(tmp_path / "c")]
    code, _, err = run_cli(args)
    assert code == 2 and err.replace(str(tmp_path), "<tmp>") == snapshot


def test_plan_brief(tmp_path, run_cli, snapshot):
    make_repo(tmp_path / "r", 40, 20)
    code, out, _ = run_cli(["plan", "--repo", tmp_path / "r", "--old", "main~39",
                            "--new", "main", "--build", BUILD, "--test", TEST, "--brief",
                            "--state", tmp_path / "st", "--jobs", "3"])
    assert code == 0 and out.replace(str(tmp_path), "<tmp>") == snapshot


def test_report_of_a_fixed_session(tmp_path, run_cli, snapshot):
    """The report of one generated session, with its timings and dates masked."""
    import re
    make_repo(tmp_path / "r", 40, 23, {11, 12})
    code, _, _ = run_cli(["bisect", "--repo", tmp_path / "r", "--old", "main~39", "--new",
                          "main", "--build", BUILD, "--test", TEST, "--state",
                          tmp_path / "st", "--quiet"])
    code, out, _ = run_cli(["report", "--state", tmp_path / "st", "-o", "-"])
    masked = re.sub(r"\d+(\.\d+)? (ms|s)\b|\d{4}-\d\d-\d\d[ T][\d:]+(\+00:00)?|"
                    r"\| \d+\.\d \|", "<t>", out.replace(str(tmp_path), "<tmp>"))
    assert code == 0 and masked == snapshot
