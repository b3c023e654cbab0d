"""What a metric session and `probe --metric` print in the terminal."""
from __future__ import annotations

from typing import Any

import click

from .json_output import emit
from ..metric.measured import measurement, spread


def print_metric(m: dict[str, Any]) -> None:
    rule = m["rule"]
    click.echo(f"Metric {m['name']} ({m['better']} is better; error rate {rule['p']}, "
               f"changes under {rule['min_change']:.1%} not bisected):")
    for key, label in (("endpoints", "old -> new endpoint"), ("culprit", "parent -> commit")):
        e = m.get(key)
        if e:
            word = "worse" if e["worse"] else "better"
            click.echo(f"  {label}: {e['change']:+.2%} ({word}; {e['confidence'] * 100:.4g}% "
                       f"interval {e['low']:+.2%} .. {e['high']:+.2%}, p = {e['p']:.2g})")
    for c in m.get("changes", []):
        click.echo(f"  change at {c['first_new'][:12]}: {c['change']:+.2%} "
                   f"({c['share']:.0%} of the endpoints' change)")


def print_measurement(commit: str, name: str, outcomes: list, as_json: bool = False) -> int:
    """`probe --metric`: each run's number (or why it has none), then their spread; exit 0
    when every run gave a number, 125 when none did, 1 otherwise."""
    values, runs = [], []
    for k, out in enumerate(outcomes, 1):
        value, why = measurement(out, name)
        logs = ", ".join(str(p) for p in out.logs.values())
        runs.append({"value": value, "why": why, "logs": logs})
        if not as_json:
            click.echo(f"{commit[:12]} run {k}: {why}" + (f"  (log: {logs})" if logs else ""))
        if value is not None:
            values.append(value)
    code = 0 if len(values) == len(outcomes) else 125 if not values else 1
    if as_json:
        emit({"commit": commit, "metric": name, "exit_code": code, "runs": runs,
              "spread": spread(values) if values else None})
        return code
    if values:
        s = spread(values)
        click.echo(f"{name}: median {s['median']:.6g} over {s['n']} of {len(outcomes)} runs "
                   f"(quartiles {s['q1']:.6g} .. {s['q3']:.6g}; {s['min']:.6g} .. "
                   f"{s['max']:.6g})")
    return 0 if len(values) == len(outcomes) else 125 if not values else 1
