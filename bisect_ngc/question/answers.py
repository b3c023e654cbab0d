"""A finished bisection as the user's question gets it: the summary that `--json` prints
(and the terminal words are made from), the titles of the commits it names, and the
report. After a descent into merges (merges.py) it is still one answer: the outer
session's id and question, the commit found inside, every session's probes counted, and
the path of descents in `descents`."""
from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any, Callable

from ..core.engine import Bisection
from ..core.records import ProbeRecord, SessionResult, tally, verification_cost
from ..core.records import SessionStatus
from ..core.store import Store
from ..report.markdown import Written, write_report
from .merges import Level

COUNTS = ("probes", "builds", "runs", "cached", "rounds", "prebuilt", "overlays")


def session_summary(store: Store, sid: str, result: SessionResult,
                    say: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A finished session as `--json` prints it, and the titles of the commits it names."""
    written = report_or_none(store, sid, say)
    probes = store.probes(sid)
    titles = _titles(store, result, probes)
    first = titles.get(result.first_new or "")
    return dict(asdict(result), **tally(probes), session=sid,
                verification=verification_cost(store.checks(sid)),
                first_new_title=first["title"] if first else None,
                first_new_pr=first["pr"] if first else None,
                report=str(written.markdown) if written else None), titles


def answer_summary(store: Store, outer: Bisection, result: SessionResult,
                   levels: list[Level], inner: dict[str, SessionResult],
                   say: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, Any]]:
    summary, titles = _answer(store, outer, result, levels, inner, say)
    first, last = summary.get("first_new"), summary.get("last_old")
    summary["parent"] = outer.span.history.parent_number(first, last) \
        if summary["status"] == "found" and first and last else None
    return summary, titles


def _answer(store: Store, outer: Bisection, result: SessionResult,
            levels: list[Level], inner: dict[str, SessionResult],
            say: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The question's one answer: the outer session's, or, where a descent found the
    commit inside a merge, that commit, with the descents and every session's counts.
    The outer session keeps the descents, so its report tells the same."""
    if levels:
        result = replace(result, descents=[lv.as_dict() for lv in levels])
        store.set_status(outer.sid, SessionStatus(result.status), result)
    summary, titles = session_summary(store, outer.sid, result, say)
    summary["descents"] = result.descents or []
    changes = (summary.get("metric") or {}).get("changes") or []
    for lv in levels:                   # each --metric change: the commit inside its merge
        if lv.found and changes:
            k = lv.change - 1 if lv.change else next(
                (i for i, c in enumerate(changes) if c["first_new"] == result.first_new), None)
            if k is not None:
                changes[k]["found"] = lv.found
    deepest = next((lv for lv in reversed(levels) if not lv.change and not lv.why
                    and lv.session), None)
    for sid in {t["session"] for lv in levels for t in lv.tried}:
        part = tally(store.probes(sid))
        for key in COUNTS:
            summary[key] += part[key]
    if deepest is None:
        kept = [lv for lv in levels if not lv.change]
        if kept:
            summary["explanation"] = "; ".join(
                p for p in (summary["explanation"], kept[-1].why) if p)
        return summary, titles
    found = inner[deepest.session or ""]
    part, part_titles = session_summary(store, deepest.session or "", found, say)
    for key in ("status", "first_new", "last_old", "candidates", "confidence", "belief",
                "first_new_title", "first_new_pr", "skipped"):
        summary[key] = part[key]
    path = " -> ".join(f"{lv.merge[:12]} (a merge)" for lv in levels
                       if not lv.change and not lv.why)
    inside = f"inside the merge{'s' if path.count('->') else ''} {path}"
    summary["explanation"] = f"{inside}: the branch's first commit with the new behaviour" \
        if found.status == "found" else f"{inside}: {part['explanation']}"
    kept = [lv for lv in levels if not lv.change]
    if kept and kept[-1].why:
        summary["explanation"] += f"; {kept[-1].merge[:12]} stays the answer: {kept[-1].why}"
    if deepest.also:
        summary["explanation"] += ("; another branch of this merge shows the change too: "
                                   + ", ".join(sha[:12] for sha in deepest.also))
    return summary, {**titles, **part_titles}


def _titles(store: Store, result: SessionResult, probes: list[ProbeRecord]
            ) -> dict[str, Any]:
    """The answer's commits as the store knows them, with why a listed one was skipped."""
    shown = [result.first_new, result.last_old, *result.candidates[:20]]
    shown += [lv.get(k) for lv in result.descents or () for k in ("merge", "found")]
    titles = {sha: dict(row) for sha, row in store.commits([s for s in shown if s]).items()}
    for p in probes:
        if p.commit in titles and p.verdict.value == "skip" and p.reason:
            titles[p.commit]["why"] = p.reason
    return titles


def report_or_none(store: Store, sid: str, say: Callable[[str], None]) -> Written | None:
    """Write the session's report; a report that fails must not lose the answer."""
    try:
        return write_report(store, sid)
    except Exception as exc:  # noqa: BLE001
        say(f"could not write the report: {type(exc).__name__}: {exc}")
        return None
