"""The accuracy table: per family, cell and tool, the grades and what the answers cost;
markdown for people, JSON for the record, and the wrong answers with their commands."""
from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any, Iterable

from .families import claimed
from .outcomes import Outcome

GRADES = ("right", "wrong", "honest", "miss")


def _pct(values: list[int], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))]:g}"


def rows(outcomes: Iterable[Outcome], by_cell: bool = True) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[(o.family, o.cell if by_cell else "all", o.who)].append(o)
    out = []
    for (family, cell, who), group in sorted(groups.items()):
        runs = [o.runs for o in group if o.runs is not None]
        builds = [o.builds for o in group if o.builds is not None]
        counts = {g: sum(o.grade == g for o in group) for g in GRADES}
        out.append({"family": family, "cell": cell, "who": who, "cases": len(group), **counts,
                    "runs_median": statistics.median(runs) if runs else None,
                    "runs_p90": _pct(runs, 0.9), "builds_median":
                    statistics.median(builds) if builds else None,
                    "builds_p90": _pct(builds, 0.9),
                    "claimed": cell == "all" or claimed(family, cell)})
    return out


def markdown(outcomes: list[Outcome], seed: int, command: str) -> str:
    lines = [f"Seed {seed}; `{command}`. Grades: **right** a `found` that names the planted "
             "commit; **wrong** a `found` that does not; **honest** a non-answer that is "
             "right (\"no change\" where nothing changed, or candidates that hold the truth "
             "where untestable commits hide it); **miss** any other non-answer. Runs: test "
             "executions, the answer's re-check included; builds: distinct commits built. "
             "Cells marked † are ones the tool does not claim to handle yet.", ""]
    for title, by_cell in (("By family", False), ("By cell", True)):
        lines += [f"### {title}", "", "| family | cell | who | cases | right | wrong | honest "
                  "| miss | runs (median / p90) | builds (median / p90) |",
                  "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows(outcomes, by_cell):
            mark = "" if r["claimed"] else " †"
            wrong = f"**{r['wrong']}**" if r["wrong"] else "0"
            lines.append(f"| {r['family']} | {r['cell']}{mark} | {r['who']} | {r['cases']} | "
                         f"{r['right']} | {wrong} | {r['honest']} | {r['miss']} | "
                         f"{_num(r['runs_median'])} / {r['runs_p90']} | "
                         f"{_num(r['builds_median'])} / {r['builds_p90']} |")
        lines.append("")
    lines += ["### The CLI sample against the in-process sessions", "", *agreement(outcomes), ""]
    stated = [o for o in outcomes if o.confidence is not None and o.who.startswith("bisect")]
    lines += ["### Calibration", "",
              "bisect-ngc states no confidence with its answers yet: nothing to calibrate."
              if not stated else _calibration(stated), ""]
    wrong = [o for o in outcomes if o.grade == "wrong" and o.who.startswith("bisect")]
    lines += ["### Wrong answers of bisect-ngc", ""] + (
        [f"- {o.family} / {o.cell} (case {o.seed}): {o.status} {o.named or ''}"
         + (f"; `{o.reproduce}`" if o.reproduce else "") for o in wrong[:60]] or ["none"])
    if len(wrong) > 60:
        lines.append(f"- ... and {len(wrong) - 60} more (the JSON lists them all)")
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _calibration(stated: list[Outcome]) -> str:
    """The answers given as answers (a commit, or no change; not `ambiguous`, whose stated
    probability is of a guess it does not give), by family and by the probability stated:
    how many were right (a right commit, or no change where nothing changed)."""
    bins: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in stated:
        if o.status != "ambiguous":
            bins[(o.family, "≥ 0.99" if (o.confidence or 0) >= 0.99 else "< 0.99")].append(o)
    lines = ["| family | stated | answers | right | right (%) |", "|---|---|---:|---:|---:|"]
    for (family, b), group in sorted(bins.items()):
        good = sum(o.grade in ("right", "honest") for o in group)
        lines.append(f"| {family} | {b} | {len(group)} | {good} | "
                     f"{100 * good / len(group):.1f} |")
    return "\n".join(lines)


def agreement(outcomes: list[Outcome]) -> list[str]:
    """Per cell run both ways: whether the CLI's grades are what the in-process rate of
    each grade makes likely (a binomial test at 0.01)."""
    from scipy.stats import binomtest
    cli: dict[tuple[str, str], list[str]] = defaultdict(list)
    engine: dict[tuple[str, str], list[str]] = defaultdict(list)
    for o in outcomes:
        if o.who == "bisect-ngc":
            cli[(o.family, o.cell)].append(o.grade)
        elif o.who == "bisect-ngc (in-process)":
            engine[(o.family, o.cell)].append(o.grade)
    lines = []
    for key in sorted(cli.keys() & engine.keys()):
        mine, ref = cli[key], engine[key]
        worst = min(binomtest(mine.count(g), len(mine),
                              max(1e-9, min(1 - 1e-9, ref.count(g) / len(ref)))).pvalue
                    for g in GRADES)
        lines.append(f"- {key[0]} / {key[1]}: CLI " + ", ".join(
            f"{g} {mine.count(g)}" for g in GRADES if mine.count(g)) + f" of {len(mine)}; "
            f"in-process " + ", ".join(f"{g} {ref.count(g)}" for g in GRADES if ref.count(g))
            + f" of {len(ref)}: {'agree' if worst >= 0.01 else 'DISAGREE'} (p {worst:.2g})")
    return lines or ["no cell ran both ways"]
