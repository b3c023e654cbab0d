"""`status`, `log` and `report`: reading a state directory (opened read-only)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from .help_sections import RichCommand
from .json_output import emit, json_option
from ..core.belief_judge import belief_words
from ..core.records import SessionStatus, tally
from ..question.flags import default_state
from ..question.options import option
from ..report.markdown import write_report
from ..core.session_lock import SessionLock
from ..core.store import Store
from .tracker import plural


@click.command(cls=RichCommand)
@option("state")
@option("session")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Where to write the markdown (default: STATE/reports/SESSION.md; '-': "
                   "stdout, the picture then in STATE/reports); the narrowing picture goes "
                   "next to it.")
def report(state: Path | None, session: str | None, output: Path | None) -> int:
    """Render a session's markdown report, finished or still running.

    The report says which commit changed the behaviour (with its PR), how sure that is
    (the verdicts of the commit and its parent), every probe, how the range narrowed,
    which releases ship the commit, and the commands that re-check it. It is made from
    the state database alone: no repository, no network.
    """
    store = Store(default_state(state), readonly=True)
    to_stdout = output is not None and str(output) == "-"
    written = write_report(store, store.find(session).id, None if to_stdout else output)
    click.echo(written.markdown.read_text() if to_stdout else str(written.markdown),
               nl=not to_stdout)
    return 0


@click.command(cls=RichCommand)
@option("state")
@option("session", help="Session id or prefix (default: all).")
@json_option
def status(state: Path | None, session: str | None, as_json: bool) -> int:
    """Show the sessions in a state directory and where each stands."""
    store = Store(default_state(state), readonly=True)
    rows: list[dict[str, Any]] = []
    for rec in [store.find(session)] if session else store.sessions():
        running = rec.status is SessionStatus.RUNNING
        alive = running and SessionLock.held(store.root, rec.params.key)
        rows.append({"session": rec.id,     # "running" with no process left: it was killed
                     "status": "stopped" if running and not alive else rec.status.value,
                     "n_candidates": len(rec.candidates) - 1, **tally(store.probes(rec.id)),
                     "first_new": rec.result.first_new if rec.result else None,
                     "updated": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rec.updated)),
                     "labels": rec.params.labels})
    if as_json:
        emit(rows)
        return 0
    if not rows:
        click.echo(f"no sessions in {store.root}")
    for r in rows:
        where = f" -> {r['first_new'][:12]}" if r["first_new"] else ""
        span = f"{r['labels'].get('old', '?')}..{r['labels'].get('new', '?')}"
        click.echo(f"{r['session']}  {r['status']:<17} {span}  "
                   f"{plural(r['n_candidates'], 'candidate')}, "
                   f"{r['probes']} probes ({r['cached']} cached), {r['rounds']} rounds"
                   f"{where}  [{r['updated']}]")
        if r["status"] == "stopped":
            click.echo("    its process is gone (killed?): the same command resumes it")
    return 0


@click.command(cls=RichCommand)
@option("state")
@option("session")
@json_option
def log(state: Path | None, session: str | None, as_json: bool) -> int:
    """Show the probe history of a session, in order."""
    store = Store(default_state(state), readonly=True)
    rec = store.find(session)
    probes = store.probes(rec.id) + store.checks(rec.id)
    if as_json:
        emit([{
            "round": p.round, "index": p.idx, "commit": p.commit, "verdict": p.verdict.value,
            "reason": p.reason, "exit_code": p.exit_code, "build_s": p.build_s,
            "test_s": p.test_s, "checkout_s": p.details.get("checkout_s"), "cached": p.cached,
            "runs": p.runs, "logs": p.logs, "tier": p.details.get("tier", "build"),
            "source": p.details.get("source"), "environment": p.details.get("environment"),
            "verify": p.details.get("verify")}
            for p in probes])
        return 0
    n = len(rec.candidates)
    click.echo(f"session {rec.id} ({rec.status.value}), {plural(n - 1, 'candidate')}")
    for p in probes:
        build = "kept" if p.details.get("build_reused") else f"{p.build_s or 0:.1f}s" + (
            " (not kept)" if p.details.get("build_not_kept") else "")
        timing = "" if p.cached else (f" checkout {p.details.get('checkout_s') or 0:.1f}s"
                                      f" build {build} test {p.test_s or 0:.1f}s")
        tag = (" cached" if p.cached else "") + (" [answer run again]" if p.details.get(
            "verify") else "") + \
            (f" [{p.details['source']}]" if p.details.get("source") else "")
        why = f" ({p.reason})" if p.reason else ""
        click.echo(f"  round {p.round:>2}  {p.commit[:12]}  {p.idx:>6}/{n - 1}  "
                   f"{p.verdict.value:<4}{why}{tag}{timing}")
    if rec.result and rec.result.belief:
        click.echo(f"how sure of the {rec.result.status} answer: "
                   f"{belief_words(rec.result.belief)}")
    return 0
