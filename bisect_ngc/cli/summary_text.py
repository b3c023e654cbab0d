"""What a finished bisection prints in the terminal (`--json` prints the summary itself)."""
from __future__ import annotations

import shlex
from typing import Any

import click

from ..core.belief_judge import belief_words
from .json_output import emit
from .metric_text import print_metric


def print_summary(summary: dict[str, Any], titles: dict, probe_argv: list[str]) -> None:
    status = summary["status"]
    overlays = f", {summary['overlays']} of them overlays" if summary["overlays"] else ""
    skipped = f"{len(summary['skipped'])} untestable commit(s), " if summary["skipped"] else ""
    tally_line = (f"{summary['probes']} probe(s) ({summary['runs']} test run(s)), {skipped}"
                  f"{summary['builds']} build(s){overlays}, "
                  f"{summary['cached']} from cache, {summary['rounds']} round(s), "
                  f"session {summary['session']}")
    checked = summary.get("verification") or {}
    if checked.get("probes"):
        tally_line += (f"; the answer's pair run again: {checked['probes']} probe(s), "
                       f"{checked['runs']} test run(s)")
    if summary.get("metric"):
        print_metric(summary["metric"])
    if status == "found":
        click.echo(f"First commit with the new behaviour ({summary['new_outcome']}; "
                   f"the old behaviour was {summary['old_outcome']}):")
        for sha, role in ((summary["first_new"], None), (summary["last_old"], "parent")):
            row = titles.get(sha)
            title = row["title"] if row else ""
            if role is None:
                pr = f" (#{row['pr']})" if row and row["pr"] and f"#{row['pr']}" not in title \
                    else ""
                click.echo(f"  {sha}{pr}\n  {title}")
                if row:
                    click.echo(f"  {row['author']}, {row['date']}")
            elif sha:
                which = {1: "first parent", 2: "second parent (the side it merged)"}.get(
                    summary.get("parent") or 1, "parent")
                click.echo(f"Its {which} ({summary['old_outcome']}): {sha[:12]} {title}")
        _print_descents(summary.get("descents") or [])
        _print_belief(summary.get("belief"))
        click.echo(tally_line)
        click.echo("Reproduce the verdicts:")
        for sha in (summary["first_new"], summary["last_old"]):
            if sha:
                click.echo("  " + shlex.join(probe_argv + ["--commit", sha]))
    elif status == "ambiguous":
        _print_ambiguous(summary["explanation"], summary["candidates"], titles)
        _print_belief(summary.get("belief"))
        click.echo(tally_line)
    elif status == "not-in-commits":
        click.echo(f"Not in these commits: {summary['explanation']}.")
        print_components(summary.get("components"))
        click.echo(tally_line)
    else:
        click.echo(f"Invalid endpoints: {summary['explanation']}.")
        for side, why in summary["endpoint_reasons"].items():
            click.echo(f"  {side} endpoint: {why}")
        click.echo(tally_line)


def _print_belief(belief: dict[str, Any] | None) -> None:
    if belief:
        click.echo(f"How sure: {belief_words(belief)}.")
        if belief.get("stale"):
            click.echo(f"The cached runs of {len(belief['stale'])} commits disagree with every "
                       f"fresh run of them: {belief['stale_advice']}.")


def print_components(found: dict[str, Any] | None) -> None:
    if found:
        click.echo(f"Which part of the container ({found['status']}): {found['explanation']}.")
        for c in found["components"]:
            mark = "  <- culprit" if c["unit"] in found["culprits"] else ""
            click.echo(f"  {c['unit']:<32} {c['in_a'] or '-':<24} {c['in_b'] or '-'}{mark}")
        print_config_diff(found)


def print_config_diff(found: dict[str, Any]) -> None:
    """What the images' configs say moved, and the units swapped first for it."""
    for row in found.get("config_diff", ()):
        click.echo(f"  config: {row['name']:<24} {row['a'] or '-':<24} {row['b'] or '-'}")
    if found.get("suspects"):
        click.echo(f"  suspected first: {', '.join(found['suspects'])}")


def _print_ambiguous(explanation: str, cands: list[str], titles: dict) -> None:
    click.echo(f"Ambiguous: {explanation}. The first new-behaviour commit is one of" +
               (":" if len(cands) <= 20 else f" the {len(cands)} from {cands[0]} to "
                                             f"{cands[-1]}."))
    for sha in cands if len(cands) <= 20 else ():
        row = titles.get(sha) or {}
        why = f"  [skipped: {row['why']}]" if row.get("why") else ""
        click.echo(f"  {sha} {row.get('title', '')}{why}")


def print_dry_run(requests: list, scripts: list[tuple[str, str]], as_json: bool,
                  result: str | None = None) -> int:
    """--dry-run: the next round's probes and the scripts they would run (or, with
    `result`, that the stored verdicts already give it); nothing runs."""
    if as_json:
        emit({"status": "dry-run", "result": result,
              "next_round": [{"commit": r.commit, "index": r.index} for r in requests],
              "scripts": [{"name": name, "script": script} for name, script in scripts]})
    elif result:
        click.echo(f"nothing to run: the stored verdicts already give the result ({result})")
    else:
        click.echo(f"next round: {len(requests)} probe(s): " +
                   ", ".join(f"{r.commit[:12]} [{r.index}]" for r in requests))
        for name, script in scripts:
            click.echo(f"\n# ---- {name} ----\n{script}")
    return 0


def _print_descents(levels: list[dict[str, Any]]) -> None:
    """The merges looked into, outermost first; where the last kept the merge, why, and
    the command that looks inside it again."""
    for lv in levels:
        which = "It" if not lv.get("change") else f"Change {lv['change']} of the metric's"
        if lv["found"]:
            click.echo(f"{which} lies on the branch that the merge {lv['merge'][:12]} brought "
                       f"in ({lv['base'][:12]}..{lv['tip'][:12]}, session {lv['session']})" +
                       (f": {lv['found'][:12]}." if lv.get("change") else "."))
            continue
        click.echo(f"{which} is a merge, and stays the answer: {lv['why'] or lv['status']}." +
                   ("  To look inside it again:\n  " + shlex.join(lv["look_inside"])
                    if lv["look_inside"] else ""))
