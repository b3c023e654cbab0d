"""Each option is declared once, in options.py, and everything else is made from that."""
from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bisect_ngc.backends.slurm.backend import SlurmSettings
from bisect_ngc.cli.main import cli
from bisect_ngc.question.metric import metric_from, with_metric_cmd
from bisect_ngc.question.options import BISECTION, OPTIONS, Options, options
from bisect_ngc.question.recipe import asked_test
from bisect_ngc.question.rules import asked_options, options_from

PKG = Path(__file__).resolve().parents[2] / "bisect_ngc"


def _declared_flags(tree: ast.AST) -> set[str]:
    """The --flags of every click.option(...) call written out in a module."""
    flags = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "option" and getattr(node.func.value, "id", "") == "click":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    flags |= {f.split("/")[0] for f in arg.value.split() if f.startswith("-")}
    return flags


def test_every_flag_is_declared_once():
    table = [f.split("/")[0] for o in OPTIONS for f in o.flags]
    assert len(table) == len(set(table))
    assert len({o.name for o in OPTIONS}) == len(OPTIONS)
    for path in PKG.rglob("*.py"):
        if path.name != "options.py":
            again = _declared_flags(ast.parse(path.read_text())) & set(table)
            assert not again, f"{path.name} declares {sorted(again)} again"


def test_the_commands_take_their_options_from_the_table():
    """What a command shows is the table's: same default, same help."""
    by_name = {o.name: o for o in OPTIONS}
    for name in ("bisect", "plan", "probe"):
        command = cli.commands[name]
        for param in command.params:
            opt = by_name.get(param.name)
            if isinstance(param, click.Option) and opt:
                assert param.help == opt.help, param.name
                assert param.required or param.default == opt.default, param.name
    bisect = {p.name for p in cli.commands["bisect"].params}
    assert {o.name for o in OPTIONS if o.group in ("question", "slurm", "metric")} <= bisect


def test_options_and_slurm_settings_come_from_the_declarations():
    fields = {f.name: f.default for f in dataclasses.fields(Options)
              if f.default is not dataclasses.MISSING}
    question = {o.name: o.default for o in OPTIONS if o.group == "question"}
    assert {k: fields[k] for k in question} == question
    slurm_defaults = {f.name: f.default_factory() if f.default is dataclasses.MISSING
                      else f.default for f in dataclasses.fields(SlurmSettings)}
    for o in OPTIONS:
        if o.group == "slurm" and o.name != "shared_dir":
            expected = slurm_defaults[o.into or o.name]
            assert o.default == (() if isinstance(expected, list) else expected), o.name


def test_a_parsed_command_line_makes_options_and_slurm_settings(tmp_path):
    seen = {}

    @click.command()
    @options("question", "slurm", "place")
    def probe(**params):
        seen["opts"] = options_from(params)

    result = CliRunner().invoke(probe, ["--repo", ".", "--old", "a", "--new", "b", "--test",
                                        "true", "--time", "1:00:00", "--container-runtime",
                                        "enroot", "--sbatch-arg=--exclusive", "--state",
                                        str(tmp_path / "st"), "--cache-dir",
                                        str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    opts = seen["opts"]
    assert opts.test == "true" and opts.keep == ("build",) and opts.repro_args == ""
    settings = SlurmSettings(**opts.slurm)
    assert settings.time == "1:00:00" and settings.runtime == "enroot"
    assert settings.sbatch_args == ["--exclusive"] and settings.max_retries == 2


def test_the_question_is_a_frozen_value_whose_fields_declare_their_flags(tmp_path):
    hints = typing.get_type_hints(Options)
    assert hints["timeout"] == float | None and hints["keep"] == tuple[str, ...]
    declared = {f.name for f in dataclasses.fields(Options) if "opt" in f.metadata}
    assert declared == {o.name for o in OPTIONS if o.group == "question"} | {"metric",
                                                                               "metric_cmd"}
    opts = Options(cache_dir=tmp_path, state=tmp_path, old="a", new="b", test="true")
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.test = "false"      # type: ignore[misc]


def test_metric_cmd_is_composed_where_the_recipe_is_made_and_params_stay_as_given(tmp_path):
    seen = {}

    @click.command()
    @asked_options(*BISECTION)
    def bisect(ctx, asked):
        metric_from(asked)
        seen["test"], seen["opts"] = asked.params["test"], asked.question
        return 0

    args = ["--repo", ".", "--old", "a", "--new", "b", "--test", "./bench", "--metric", "ms",
            "--metric-cmd", "cat out.txt", "--state", str(tmp_path / "s"),
            "--cache-dir", str(tmp_path / "c")]
    result = CliRunner().invoke(bisect, args)
    assert result.exit_code == 0, result.output
    assert seen["test"] == seen["opts"].test == "./bench"
    assert asked_test(seen["opts"]) == with_metric_cmd("./bench", "cat out.txt", "ms")


def test_a_command_gets_one_typed_value_and_knows_what_was_given(tmp_path):
    seen = {}

    @click.command()
    @asked_options(*BISECTION)
    def bisect(ctx, asked):
        seen["asked"] = asked
        return 0

    args = ["--repo", ".", "--old", "a", "--new", "b", "--test", "t", "--jobs", "3",
            "--repeat", "2", "--max-runs", "40", "--state", str(tmp_path / "s")]
    result = CliRunner().invoke(bisect, args)
    asked = seen["asked"]
    assert result.exit_code == 0, result.output
    assert (asked.bisect.jobs, asked.run.repeat, asked.measure.max_runs) == (3, 2, 40)
    assert asked.question.test == "t" and asked.bisect.max_skips == 32
    assert {"jobs", "repeat", "max_runs", "test"} <= asked.given and "max_skips" not in asked.given
    assert asked.with_question(old="c").question.old == "c" and asked.question.old == "a"
