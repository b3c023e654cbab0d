"""`--json`: one option for every command that takes it, and the one JSON value a run
prints when it ends in an error or an interruption instead of a result."""
from __future__ import annotations

import json
from typing import Any

import click

from ..question.options import option

_requested = {"json": False, "printed": False}


def _remember(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    _requested["json"] = _requested["json"] or bool(value)
    return value


# Eager: known before any other option is checked, so a usage error can be told in JSON.
json_option = option("as_json", callback=_remember, expose_value=True)


def reset() -> None:
    _requested.update(json=False, printed=False)


def emit(value: Any) -> None:
    """Print the run's one JSON value."""
    click.echo(json.dumps(value))
    _requested["printed"] = True


def request() -> None:
    _requested["json"] = True


def requested() -> bool:
    return _requested["json"]


def print_error(status: str, exit_code: int, message: str, hint: str = "",
                **extra: Any) -> None:
    """The error as the run's JSON value, unless the command printed its own already
    (`plan` prints what it knows, then exits 2)."""
    if _requested["printed"]:
        return
    value = {"status": status, "exit_code": exit_code, "message": message}
    if hint:
        value["hint"] = hint
    emit(dict(value, **extra))
