"""A finished bisection as the CLI gives it: the summary that `--json` prints (and the
terminal words are made from), the titles of the commits it names, the answer after a
descent into a merge, and the report written on the way."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

import click

from .progress import say
from ..core.engine import Bisection
from ..question.wiring import Question, command_line
from ..core.records import ProbeRecord, SessionResult, tally, verification_cost
from ..report.markdown import Written, write_report
from ..core.store import Store


def session_summary(q: Question, bis: Bisection, result: SessionResult
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    """A finished session as `--json` prints it, and the titles of the commits it names."""
    written = report_or_none(q.store, bis.sid)
    probes = q.store.probes(bis.sid)
    titles = _titles(q.store, result, probes)
    first = titles.get(result.first_new or "")
    return dict(asdict(result), **tally(probes), session=bis.sid,
                verification=verification_cost(q.store.checks(bis.sid)),
                first_new_title=first["title"] if first else None,
                first_new_pr=first["pr"] if first else None, merge=None,
                report=str(written.markdown) if written else None), titles


def descended(outer: dict[str, Any], titles: dict[str, Any], q: Question, bis: Bisection,
              result: SessionResult, ctx: click.Context
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The answer after a bisection inside the merge `outer` named: the branch's commit
    when it found one, else the merge, with what the branch showed and the command that
    looks inside it again."""
    inner, inner_titles = session_summary(q, bis, result)
    span = bis.span
    merge = {"commit": outer["first_new"], "base": span.old, "tip": span.new,
             "session": outer["session"], "inside": {k: inner[k] for k in (
                 "status", "explanation", "session", "first_new", "report")},
             "look_inside": None if q.opts.release_mode else  # --from/--to name releases
             command_line(ctx, "bisect", ("old", "new")) + ["--old", span.old, "--new", span.new]}
    if inner["status"] != "found":
        return dict(outer, merge=merge), titles
    where = (f"on the branch merged by {outer['first_new'][:12]}, the first-parent answer "
             f"({outer['probes']} probe(s) in session {outer['session']})")
    return dict(inner, merge=merge, explanation="; ".join(
        part for part in (inner["explanation"], where) if part)), inner_titles


def _titles(store: Store, result: SessionResult, probes: list[ProbeRecord]
            ) -> dict[str, Any]:
    """The answer's commits as the store knows them, with why a listed one was skipped."""
    shown = [result.first_new, result.last_old, *result.candidates[:20]]
    titles = {sha: dict(row) for sha, row in store.commits([s for s in shown if s]).items()}
    for p in probes:
        if p.commit in titles and p.verdict.value == "skip" and p.reason:
            titles[p.commit]["why"] = p.reason
    return titles


def report_or_none(store: Store, sid: str) -> Written | None:
    """Write the session's report; a report that fails must not lose the answer."""
    try:
        return write_report(store, sid)
    except Exception as exc:  # noqa: BLE001
        say(f"could not write the report: {type(exc).__name__}: {exc}")
        return None
