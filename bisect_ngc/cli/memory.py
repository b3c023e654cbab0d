"""`forget` and `gc`: correcting what a state directory remembers."""
from __future__ import annotations

from pathlib import Path

import click

from .help_sections import RichCommand
from .json_output import emit, json_option
from ..core.store import Store
from ..question.memory import collect, forget as forget_in
from ..question.flags import default_cache, default_state
from ..question.options import option
from .tracker import plural


@click.command(cls=RichCommand)
@option("state")
@option("cache_dir")
@option("commit", required=False, metavar="SHA",
        help="Forget everything about this commit (a sha or its first digits): every cached "
             "verdict, its probes in unfinished sessions, its kept builds.")
@option("session", help="Forget the cached verdicts this session (id or prefix) used or made, "
                        "and its probes if it is unfinished.", metavar="ID")
@option("test", help="Forget every verdict cached under this --test command (exactly as the "
                     "bisection gave it).", metavar="CMD")
@json_option
def forget(state: Path | None, cache_dir: Path | None, commit: str | None,
           session: str | None, test: str | None, as_json: bool) -> int:
    """Drop remembered verdicts so that the next run probes them again.

    A cached verdict answers for a commit for good, as long as its build and test keys
    match. When something the keys do not see changed (a file the test reads that no
    command names, a variable it reads without naming it), or when a fresh run
    contradicts a cached verdict, forget it and run the same command again.

    \b
    Examples:
      bisect-ngc forget --commit 1a2b3c4d
      bisect-ngc forget --session 0442c79138-1
      bisect-ngc forget --test "$PWD/check.sh"
    """
    store = Store(default_state(state), readonly=True)   # a state that exists, or an error
    store.close()
    store = Store(default_state(state))
    done = forget_in(store, default_cache(cache_dir), commit=commit, session=session,
                     test=test)
    if as_json:
        emit(done.as_dict())
        return 0
    click.echo(f"forgot {plural(done.cached, 'cached verdict')}, "
               f"{plural(done.probes, 'probe')} of unfinished sessions and "
               f"{plural(len(done.builds), 'kept build')}; the next run probes them again")
    for path in done.builds:
        click.echo(f"  removed {path}")
    for sid in done.running:
        click.echo(f"  session {sid} runs now: its probes were left alone")
    return 0


@click.command(cls=RichCommand)
@option("state")
@option("dry_run", help="List what would be removed; remove nothing.")
@json_option
def gc(state: Path | None, dry_run: bool, as_json: bool) -> int:
    """Remove the probe worktrees that no running bisection holds.

    Worktrees stay after a session so that the next one of the same project checks out
    and builds incrementally; this removes them (and their kept build trees), leaving
    those of sessions that run now. Verdicts, logs, reports and kept builds stay.
    """
    found = collect(default_state(state), dry_run=dry_run)
    if as_json:
        emit([{"path": c.path, "bytes": c.size, "in_use": c.in_use, "removed": c.removed}
              for c in found])
        return 0
    free = [c for c in found if not c.in_use]
    click.echo(f"{'would remove' if dry_run else 'removed'} {plural(len(free), 'lane')} of "
               f"worktrees, {sum(c.size for c in free) / 2**20:.1f} MiB")
    for c in found:
        tag = "in use" if c.in_use else "removed" if c.removed else "free"
        click.echo(f"  {tag:<8} {c.path}  {c.size / 2**20:.1f} MiB")
    return 0
