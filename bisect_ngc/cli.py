"""The `bisect-ngc` command line."""
from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

import click

from . import __version__
from .backends import ProbeRequest
from .backends.local import LocalBackend
from .engine import Bisection, Range, tally
from .errors import (EXIT_AMBIGUOUS, EXIT_BAD_INPUT, EXIT_FOUND, EXIT_INTERRUPTED,
                     EXIT_INVALID_ENDPOINTS, UserError)
from .history import CommitInfo, History, Worktrees
from .progress import make_events
from .search import RepeatPolicy, expected_probes, expected_rounds
from .store import StateLock, Store

EXIT_CODES_HELP = """\b
Exit codes:
  0    found the first commit with the new behaviour
  2    bad input (unknown revision, missing tool, state in use, ...)
  3    invalid endpoints (both behave the same, or one cannot be tested)
  4    ambiguous (untestable commits hide the transition; candidates listed)
  130  interrupted; the state is kept and the same command resumes
"""

VERDICT_HELP = """\b
The test command follows `git bisect run`:
  exit 0 = pass, 125 = cannot test (skip), 1-127 = fail,
  killed by a signal or by --timeout = skip.
A failed build is a skip too. Both commands run in the commit's worktree with
BISECT_COMMIT, BISECT_WORKTREE and BISECT_ARTIFACTS set.
"""


def default_state(state: Path | None = None) -> Path:
    if state is None and os.environ.get("BISECT_NGC_STATE"):
        state = Path(os.environ["BISECT_NGC_STATE"])
    if state is None:
        state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") \
            / "bisect-ngc"
    return state.expanduser().resolve()


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(os.environ.get("BISECT_NGC_CACHE") or Path(base) / "bisect-ngc")


def state_option(f):
    return click.option("--state", "state", type=click.Path(path_type=Path), default=None,
                        help="State directory (sessions, probes, logs, result cache). "
                             "Default: $BISECT_NGC_STATE or ~/.local/state/bisect-ngc.")(f)


def range_options(f):
    opts = [
        click.option("--repo", default=".", show_default=True,
                     help="Local path or clone URL (cloned once into the cache dir)."),
        click.option("--old", required=True, help="Revision with the old behaviour."),
        click.option("--new", required=True,
                     help="Revision with the new behaviour (the search finds the first commit "
                          "that behaves like it; a fix or a regression alike)."),
        click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
                     help="Where URL clones are kept. Default: ~/.cache/bisect-ngc."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def recipe_options(f):
    opts = [
        click.option("--build", default=None, help="Shell command that builds the commit."),
        click.option("--test", "test_cmd", required=True,
                     help="Shell command whose exit code is the verdict."),
        click.option("--timeout", type=float, default=None,
                     help="Seconds one test run may take; past it the run is a skip."),
        click.option("--build-timeout", type=float, default=None,
                     help="Seconds one build may take; past it the commit is a skip."),
        click.option("--no-clean", is_flag=True,
                     help="Keep untracked files in the worktree between probes "
                          "(incremental builds); the default is `git clean -ffdx`."),
        click.option("--backend", type=click.Choice(["local"]), default="local",
                     show_default=True, help="Where builds and tests run."),
        click.option("--repeat", type=click.IntRange(1, 100), default=1, show_default=True,
                     help="Test runs per commit, for flaky repros."),
        click.option("--repeat-policy", type=click.Choice([p.value for p in RepeatPolicy]),
                     default="any", show_default=True,
                     help="any: one failing run makes the commit fail (intermittent failures). "
                          "majority: the commoner of pass/fail wins; a tie is a skip."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="bisect-ngc")
def cli() -> None:
    """Find the upstream commit that changed a repro's behaviour.

    \b
    Bisect any git repository with a build and a test command:
      bisect-ngc bisect --repo PATH --old GOOD --new BAD --build 'make' --test './check'
    Dry run (counts candidates, probes and rounds; builds nothing):
      bisect-ngc plan --repo PATH --old GOOD --new BAD --test './check'
    Look at past and running sessions:
      bisect-ngc status ; bisect-ngc log
    """


def _open_range(repo: str, old: str, new: str, cache_dir: Path | None) -> Range:
    history = History.open(repo, cache_dir or default_cache())
    old_sha, new_sha = history.resolve(old), history.resolve(new)
    candidates = history.candidates(old_sha, new_sha)
    return Range(history, old_sha, new_sha, candidates, history.identity(new_sha),
                 {"old": old, "new": new})


def _make_backend(name: str, rng: Range, state: Path, opts: dict[str, Any]) -> LocalBackend:
    worktrees = Worktrees(rng.history, state / "worktrees" / rng.repo_id[:12])
    return LocalBackend(worktrees, build=opts["build"], test=opts["test_cmd"],
                        timeout=opts["timeout"], build_timeout=opts["build_timeout"],
                        clean=not opts["no_clean"])


@cli.command(epilog=EXIT_CODES_HELP + "\n" + VERDICT_HELP)
@range_options
@recipe_options
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Probes per round, each in its own worktree; a round splits the range "
                   "into jobs+1 parts.")
@state_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the result.")
@click.option("--quiet", "-q", is_flag=True, help="No progress display.")
def bisect(repo, old, new, cache_dir, build, test_cmd, timeout, build_timeout, no_clean, backend,
           repeat, repeat_policy, jobs, state, as_json, quiet):
    """Bisect between OLD and NEW on the first-parent path.

    Both endpoints are tested first. Killed or interrupted, the same command resumes
    where it stopped; verdicts are cached, so a repeated or overlapping bisection reuses
    them.
    """
    state = default_state(state)
    opts = dict(build=build, test_cmd=test_cmd, timeout=timeout, build_timeout=build_timeout,
                no_clean=no_clean)
    with StateLock(state):
        store = Store(state)
        rng = _open_range(repo, old, new, cache_dir)
        backend_obj = _make_backend(backend, rng, state, opts)
        backend_obj.prepare()
        events = make_events(jobs, quiet or as_json and not sys.stderr.isatty())
        bis = Bisection(store, rng, backend_obj, jobs=jobs, repeat=repeat,
                        policy=RepeatPolicy(repeat_policy), events=events,
                        extra={"command": _command_line()})
        try:
            summary = bis.run()
        except KeyboardInterrupt:
            sid = bis.session.id if bis.session else "?"
            raise UserError(f"interrupted; session {sid} is kept in {state}",
                            hint="run the same command again to resume",
                            code=EXIT_INTERRUPTED) from None
    infos = rng.history.info([s for s in (summary["first_new"], summary["last_old"]) if s])
    _attach_info(summary, infos)
    if as_json:
        click.echo(json.dumps(summary))
    else:
        _print_summary(summary, infos, rng, opts, state)
    return {"found": EXIT_FOUND, "ambiguous": EXIT_AMBIGUOUS,
            "invalid-endpoints": EXIT_INVALID_ENDPOINTS}[summary["status"]]


def _command_line() -> list[str]:
    return ["bisect-ngc"] + sys.argv[1:]


def _attach_info(summary: dict[str, Any], infos: dict[str, CommitInfo]) -> None:
    first = infos.get(summary["first_new"] or "")
    summary["first_new_title"] = first.title if first else None
    summary["first_new_pr"] = first.pr if first else None


def _reproduce(rng: Range, opts: dict[str, Any], state: Path, sha: str) -> str:
    argv = ["bisect-ngc", "probe", "--repo", rng.history.origin, "--commit", sha,
            "--test", opts["test_cmd"], "--state", str(state)]
    if opts["build"]:
        argv += ["--build", opts["build"]]
    if opts["timeout"]:
        argv += ["--timeout", f"{opts['timeout']:g}"]
    return shlex.join(argv)


def _print_summary(summary, infos, rng, opts, state) -> None:
    status = summary["status"]
    tally = (f"{summary['probes']} probe(s), {summary['cached']} from cache, "
             f"{summary['rounds']} round(s), session {summary['session']}")
    if status == "found":
        first, last = infos[summary["first_new"]], infos.get(summary["last_old"])
        pr = f" (#{first.pr})" if first.pr else ""
        click.echo(f"First commit with the new behaviour ({summary['new_outcome']}; "
                   f"the old behaviour was {summary['old_outcome']}):")
        click.echo(f"  {first.sha}{pr}\n  {first.title}\n  {first.author}, {first.date}")
        if last:
            click.echo(f"Its first parent on the path ({summary['old_outcome']}): "
                       f"{last.short} {last.title}")
        click.echo(tally)
        click.echo("Reproduce the verdicts:")
        click.echo("  " + _reproduce(rng, opts, state, first.sha))
        if last:
            click.echo("  " + _reproduce(rng, opts, state, last.sha))
    elif status == "ambiguous":
        click.echo(f"Ambiguous: {summary['explanation']}. The first new-behaviour commit is "
                   "one of:")
        for sha in summary["candidates"]:
            click.echo(f"  {sha}")
        click.echo(tally)
    else:
        click.echo(f"Invalid endpoints: {summary['explanation']}.")
        click.echo(tally)


@cli.command(epilog=VERDICT_HELP)
@range_options
@recipe_options
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def plan(repo, old, new, cache_dir, build, test_cmd, timeout, build_timeout, no_clean, backend,
         repeat, repeat_policy, jobs, as_json):
    """Dry run: count candidates and the probes and rounds to expect. Builds nothing."""
    rng = _open_range(repo, old, new, cache_dir)
    n = len(rng.candidates)
    infos = rng.history.info([rng.old, rng.new])
    out = {
        "candidates": n, "old": rng.old, "new": rng.new,
        "old_title": infos[rng.old].title, "new_title": infos[rng.new].title,
        "jobs": jobs, "repeat": repeat,
        "expected_rounds": expected_rounds(n, jobs),
        "expected_probes": expected_probes(n, jobs) * repeat,
        "backend": backend, "build": build, "test": test_cmd,
    }
    if as_json:
        click.echo(json.dumps(out))
        return 0
    click.echo(f"{n} candidates on the first-parent path")
    click.echo(f"  old {rng.old[:12]} {out['old_title']}")
    click.echo(f"  new {rng.new[:12]} {out['new_title']}")
    click.echo(f"Expected without skips: {out['expected_rounds']} round(s), at most "
               f"{out['expected_probes']} probe(s) with --jobs {jobs} --repeat {repeat}")
    click.echo(f"Backend {backend}: build {build!r}, test {test_cmd!r}")
    return 0


@cli.command()
@click.option("--repo", default=".", show_default=True)
@click.option("--commit", required=True, help="The revision to build and test.")
@recipe_options
@state_option
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None)
def probe(repo, commit, build, test_cmd, timeout, build_timeout, no_clean, backend, repeat,
          repeat_policy, state, cache_dir):
    """Build and test one commit now (no cache) and exit with its verdict: 0 pass, 1 fail,
    125 skip."""
    state = default_state(state)
    opts = dict(build=build, test_cmd=test_cmd, timeout=timeout, build_timeout=build_timeout,
                no_clean=no_clean)
    with StateLock(state):
        store = Store(state)
        history = History.open(repo, cache_dir or default_cache())
        sha = history.resolve(commit)
        rng = Range(history, sha, sha, [sha], history.identity(sha), {"commit": commit})
        backend_obj = _make_backend(backend, rng, state, opts)
        backend_obj.prepare()
        sid = f"probe-{time.strftime('%Y%m%d-%H%M%S')}"
        req = ProbeRequest(session=sid, commit=sha, index=0, slot=0, runs=repeat,
                           policy=RepeatPolicy(repeat_policy),
                           log_dir=store.root / "logs" / sid / sha[:12],
                           artifacts=store.root / "artifacts" / "probe" / sha)
        try:
            (_, outcome), = list(backend_obj.run_round([req], lambda r, p: None))
        except KeyboardInterrupt:
            backend_obj.cancel()
            raise
    why = f" ({outcome.reason})" if outcome.reason else ""
    click.echo(f"{sha[:12]}: {outcome.verdict.value}{why}")
    for name, path in outcome.logs.items():
        click.echo(f"  {name} log: {path}")
    return {"pass": 0, "fail": 1, "skip": 125}[outcome.verdict.value]


@cli.command()
@state_option
@click.option("--session", default=None, help="Session id or prefix (default: all).")
@click.option("--json", "as_json", is_flag=True)
def status(state, session, as_json):
    """Show the sessions in a state directory and where each stands."""
    store = Store(default_state(state))
    records = [store.find(session)] if session else store.sessions()
    rows = []
    for rec in records:
        probes = store.probes(rec.id)
        result = rec.result or {}
        rows.append({
            "session": rec.id, "status": rec.status, "candidates": len(rec.candidates),
            **tally(probes),
            "first_new": result.get("first_new"),
            "updated": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rec.updated)),
            "labels": rec.params.get("labels", {}),
        })
    if as_json:
        click.echo(json.dumps(rows))
        return 0
    if not rows:
        click.echo(f"no sessions in {store.root}")
        return 0
    for r in rows:
        where = f" -> {r['first_new'][:12]}" if r["first_new"] else ""
        labels = r["labels"]
        span = f"{labels.get('old', '?')}..{labels.get('new', '?')}"
        click.echo(f"{r['session']}  {r['status']:<17} {span}  {r['candidates']} candidates, "
                   f"{r['probes']} probes ({r['cached']} cached), {r['rounds']} rounds"
                   f"{where}  [{r['updated']}]")
    return 0


@cli.command()
@state_option
@click.option("--session", default=None, help="Session id or prefix (default: the latest).")
@click.option("--json", "as_json", is_flag=True)
def log(state, session, as_json):
    """Show the probe history of a session, in order."""
    store = Store(default_state(state))
    rec = store.find(session)
    probes = store.probes(rec.id)
    if as_json:
        click.echo(json.dumps([{
            "round": p.round, "index": p.idx, "commit": p.commit, "verdict": p.verdict.value,
            "reason": p.reason, "exit_code": p.exit_code, "build_s": p.build_s,
            "test_s": p.test_s, "cached": p.cached, "runs": p.runs, "logs": p.logs}
            for p in probes]))
        return 0
    n = len(rec.candidates)
    click.echo(f"session {rec.id} ({rec.status}), {n} candidates")
    for p in probes:
        timing = "" if p.cached else \
            f" build {p.build_s or 0:.1f}s test {p.test_s or 0:.1f}s"
        tag = " cached" if p.cached else ""
        why = f" ({p.reason})" if p.reason else ""
        click.echo(f"  round {p.round:>2}  {p.commit[:12]}  {p.idx:>6}/{n - 1}  "
                   f"{p.verdict.value:<4}{why}{tag}{timing}")
    return 0


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        rv = cli.main(args=argv, prog_name="bisect-ngc", standalone_mode=False)
    except UserError as exc:
        click.echo(f"error: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        return exc.code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo("error: interrupted", err=True)
        return EXIT_INTERRUPTED
    return rv if isinstance(rv, int) else 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
