"""The `bisect-ngc` command line: it parses, calls and prints. What the options mean and
how a question is wired live in question/."""
from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from dataclasses import replace
from types import FrameType
from typing import Any

import click

from . import json_output
from .json_output import emit, json_option
from .. import __version__
from ..core.inputs import Range, Settings, stop_if_needed
from ..errors import (EXIT_AMBIGUOUS, EXIT_FOUND, EXIT_INTERRUPTED, EXIT_INVALID_ENDPOINTS,
                      EXIT_NOT_IN_COMMITS, UserError)
from .cache import cache
from .components import components
from .metric_text import print_measurement
from ..vcs.mirrors import redact_url
from ..vcs.worktrees import release_lanes
from .help_sections import RichGroup, epilog, install as install_help_sections
from ..question.merges import descend
from ..question.recipe import host_snapshot, key_drift
from ..question.metric import metric_from
from .catalog import releases, resolve
from .diff import diff
from .sessions import log, report, status
from .memory import forget, gc
from .slurm import slurm
from .progress import make_events, say
from ..question.options import BISECTION, option
from ..question.rules import Asked, asked_options
from ..question.wiring import Question, ask, command_line, jobs_notes, run_settings
from .help_texts import EXIT_CODES_HELP, RELEASE_HELP, VERDICT_HELP
from ..question.answers import answer_summary, report_or_none
from .summary_text import print_dry_run, print_summary
from ..core.search import RepeatPolicy, expected_probes, expected_rounds, tiered_estimate
from ..core.belief import Prior
from ..core.engine import Bisection
from ..core.probes import Backend
from ..core.records import SessionResult, SessionStatus
from ..core.session_lock import SessionLock

STATUS_EXIT = {"found": EXIT_FOUND, "ambiguous": EXIT_AMBIGUOUS,
               "invalid-endpoints": EXIT_INVALID_ENDPOINTS,
               "not-in-commits": EXIT_NOT_IN_COMMITS}


@click.group(cls=RichGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="bisect-ngc")
def cli() -> None:
    """Find the upstream commit that changed a repro's behaviour.

    \b
    Between two NGC PyTorch releases (Docker, GPUs and nvcr.io access needed):
      bisect-ngc bisect --from 24.09 --to 24.10
    Any git repository, with a build and a test command:
      bisect-ngc bisect --repo PATH --old GOOD --new BAD --build make --test "$PWD/t.sh"
    Dry run (candidates, probes, rounds, base image and recipe; builds nothing):
      bisect-ngc plan --from 24.09 --to 24.10
    The release catalog, and what two releases differ in (read from nvcr.io, no pull):
      bisect-ngc releases ; bisect-ngc resolve 24.09 ; bisect-ngc diff 24.09 24.10
    On a Slurm cluster (the controller itself as a batch job):
      bisect-ngc slurm submit --from 24.09 --to 24.10 --gpu-partition gpu
    Sessions and the markdown report:
      bisect-ngc status ; bisect-ngc log ; bisect-ngc report
    Which part of the container makes two images differ (Docker):
      bisect-ngc components --from IMAGE_A --to IMAGE_B --test 'python -m repro'
    """


BISECT_HELP = """Bisect between two revisions or releases on the first-parent path.

Both endpoints are tested first. Killed or interrupted, the same command resumes
where it stopped; verdicts are cached, so a repeated or overlapping bisection reuses
them, and built wheels are reused across sessions and backends.

\b
Examples:
  bisect-ngc bisect --repo . --old v1.0 --new main --test "$PWD/check.sh"
  bisect-ngc bisect --repo . --old v1.0 --new main --test ./bench \\
      --metric step_ms
  bisect-ngc bisect --from 24.09 --to 24.10
"""


@cli.command(help=BISECT_HELP, epilog=epilog(EXIT_CODES_HELP, VERDICT_HELP, RELEASE_HELP))
@asked_options(*BISECTION)
@json_option
def bisect(ctx: click.Context, asked: Asked, as_json: bool) -> int:
    metric, opts, how = metric_from(asked), asked.question, asked.bisect
    settings = run_settings(asked, ctx)
    quiet = how.quiet or as_json and not sys.stderr.isatty()
    q = ask(opts, say)
    for note in q.notes + jobs_notes(opts.backend_name, how.jobs):
        say(note)
    if how.dry_run:
        return _dry_run(q.bisection(settings, metric=metric, listing=False),
                        q.backend_or_raise(), as_json)
    bis, before = q.bisection(settings, metric=metric), host_snapshot(q.recipe)
    with SessionLock(opts.state, bis.key, bis.predicted_session()[0]):
        q.backend_or_raise().prepare()
        bis.events = make_events(how.jobs, quiet)
        bis, result = _run(q, bis)
        inner: dict[str, SessionResult] = {}

        def branch(span: Range, why: str, prior: Prior | None
                   ) -> tuple[Bisection, SessionResult]:
            say(why)
            sub = replace(q, span=span, recipe=bis.recipe, backend=bis.backend)
            b = sub.bisection(settings, metric=metric, prior=prior)
            try:
                with SessionLock(opts.state, b.key, b.predicted_session()[0]):
                    b.events = make_events(how.jobs, quiet)
                    b, res = _run(sub, b)
            except BaseException:       # the same command resumes the outer session, then this
                q.store.set_status(bis.sid, SessionStatus.INTERRUPTED)
                raise
            inner[b.sid] = res
            return b, res

        def look_inside(base: str, tip: str) -> list[str]:
            return [] if opts.release_mode else (     # --from/--to name releases
                command_line(ctx, "bisect", ("old", "new")) + ["--old", base, "--new", tip])
        levels = [] if how.no_descend else \
            descend(q.span_or_raise().history, result, branch, look_inside)
        summary, titles = answer_summary(q.store, bis, result, levels, inner, say)
    for note in key_drift(before, bis.recipe):
        say(note)
    if as_json:
        emit(summary)
    else:
        print_summary(summary, titles, settings.probe_argv)
        if summary["report"]:
            click.echo(f"Report: {summary['report']}")
    return STATUS_EXIT[summary["status"]]


def _run(q: Question, bis: Bisection) -> tuple[Bisection, SessionResult]:
    try:
        return bis, bis.run()
    except KeyboardInterrupt:
        sid = bis.session.id if bis.session else None
        if sid:
            report_or_none(q.store, sid, say)
        raise UserError(f"interrupted; session {sid} is kept in {q.opts.state}",
                        hint="run the same command again to resume: " +
                        shlex.join(["bisect-ngc", *map(redact_url, _invocation["args"])]),
                        code=EXIT_INTERRUPTED, session=sid) from None


def _dry_run(bis: Bisection, backend: Backend, as_json: bool) -> int:
    step = bis.peek()
    if not isinstance(step, list):
        return print_dry_run([], [], as_json, result=step.status.value)
    first = step[:bis.settings.jobs]        # what is submitted first: --jobs at a time
    return print_dry_run(step, backend.dry_run(first), as_json)


@cli.command(epilog=epilog(VERDICT_HELP, RELEASE_HELP))
@asked_options(*BISECTION)
@option("brief")
@json_option
def plan(ctx: click.Context, asked: Asked, brief: bool, as_json: bool) -> int:
    """Dry run: candidates, expected probes and rounds, the recipe and where it would run.
    Builds nothing and starts no container. Exits 2 when the candidates cannot be listed
    (after printing the rest). Takes a `bisect` command line as it is."""
    metric, opts = metric_from(asked), asked.question
    jobs, repeat = asked.bisect.jobs, asked.run.repeat
    q = ask(opts, say, partial=True)
    out: dict[str, Any] = {"backend": opts.backend_name, "jobs": jobs, "repeat": repeat,
                           "endpoints": {}, "recipe": q.recipe.show(), "notes": q.notes,
                           "component": opts.component if opts.release_mode else None,
                           "metric": metric.name if metric else None}
    for side, ep in (("old", q.old), ("new", q.new)):
        out["endpoints"][side] = {"label": ep.label, "kind": ep.kind, "rev": ep.rev,
                                  "image": ep.image,
                                  "release": ep.release.as_dict() if ep.release else None}
    failed = q.span_error
    if failed is not None:
        out.update(n_candidates=None, candidates_error=f"{failed.message} ({failed.hint})")
    else:
        span = q.span_or_raise()
        n = len(span.candidates) - 1
        titles = span.history.info([span.old, span.new])
        out.update(n_candidates=n, expected_rounds=expected_rounds(n + 1, jobs),
                   expected_probes=expected_probes(n + 1, jobs) * repeat,
                   where=q.backend_or_raise().describe(), tiers=_tier_plan(q, n + 1, jobs))
        out["belief"] = metric is None and not opts.release_mode and not out["tiers"]
        for side, sha in (("old", span.old), ("new", span.new)):
            out["endpoints"][side].update(commit=sha, title=titles[sha].title)
    if as_json:
        emit(out)
    else:
        _print_plan(out, brief)
    if failed is not None:
        raise UserError(f"cannot list the candidates: {failed.message}", hint=failed.hint)
    return 0


def _tier_plan(q: Question, n: int, jobs: int) -> list[dict[str, Any]]:
    """The images first, when release mode probes them: which, and what they leave."""
    images = q.image_points()
    if not images:
        return []
    est = tiered_estimate(n, images, jobs)
    return [{"tier": "image", "points": [images[i] for i in sorted(images)],
             "expected_probes": est["tier_probes"], "expected_rounds": est["tier_rounds"]},
            {"tier": "build", "widest": est["widest"], "expected_probes": est["build_probes"],
             "expected_rounds": est["build_rounds"],
             "base_image": "the older of the two adjacent releases the images narrow to"
             if q.follows_narrowing() else q.recipe.image}]


def _print_plan(out: dict[str, Any], brief: bool) -> None:
    for side in ("old", "new"):
        ep = out["endpoints"][side]
        rel = ep["release"]
        what = f"release {rel['name']} ({ep['image']}, torch {rel['torch_version']})" if rel \
            and out["component"] == "torch" else ep["label"]
        title = f" {ep['title']}" if ep.get("title") else ""
        click.echo(f"{side}: {what}\n     commit {ep.get('commit') or ep['rev']}{title}")
    if out.get("n_candidates") is None:
        click.echo(f"candidates: unknown: {out.get('candidates_error')}")
    else:
        click.echo(f"{out['n_candidates']} commits after the old endpoint on the first-parent "
                   f"path; without skips expect {out['expected_rounds']} round(s), at most "
                   f"{out['expected_probes']} probe(s) with --jobs {out['jobs']}"
                   + (" if everything were built" if out.get("tiers") else ""))
        if out.get("belief"):
            click.echo("  the belief (--confidence) adds about 7 runs to these for a test that "
                       "never contradicts itself (up to 20), and more for a flaky one")
        for t in out.get("tiers", []):
            if t["tier"] == "image":
                click.echo(f"first, images as they are (no build): {', '.join(t['points'])}; "
                           f"at most {t['expected_probes']} probe(s) in "
                           f"{t['expected_rounds']} round(s)")
            else:
                click.echo(f"then builds in {t['base_image']}: at most {t['widest']} commits "
                           f"left, at most {t['expected_probes']} probe(s) in "
                           f"{t['expected_rounds']} round(s), the two releases' own commits "
                           f"first")
    recipe = out["recipe"]
    click.echo(f"backend: {out['backend']}")
    for key, value in sorted(out.get("where", {}).items()):
        click.echo(f"  {key}: {value}")
    for key in ("base_image", "build_image"):
        if recipe[key]:
            click.echo(f"{key.replace('_', ' ')}: {recipe[key]}")
    for key, value in sorted(recipe["settings"].items()):
        click.echo(f"  {key}: {value}")
    if recipe["with"]:
        click.echo(f"with, after the probed torch: {', '.join(recipe['with'])}")
    if brief and recipe["build_dockerfile"]:
        click.echo("(without --brief: the rendered build and test scripts)")
    else:
        click.echo(f"build:\n{_indent(recipe['build'])}\ntest:\n"
                   f"{_indent(recipe['test_with'] or recipe['test'])}")
        if recipe["build_dockerfile"]:
            click.echo(f"build image Dockerfile:\n{_indent(recipe['build_dockerfile'])}")
    for note in out["notes"]:
        click.echo(f"note: {note}")


def _indent(text: str | None) -> str:
    return "\n".join("    " + line for line in (text or "(none)").rstrip().splitlines())


@cli.command(epilog=epilog(VERDICT_HELP))
@asked_options(*BISECTION)
@option("commit")
@json_option
def probe(ctx: click.Context, asked: Asked, commit: str, as_json: bool) -> int:
    """Build and test one commit now, bypassing the result cache (and any kept build),
    and exit with its verdict: 0 pass, 1 fail, 125 skip. Takes a `bisect` command line
    with --commit added (--jobs and --max-skips have no effect on one probe); `bisect`
    prints the probe commands that re-check its answer.

    With --metric NAME it measures instead: --runs-per-round runs, one at a time, each
    number printed, then their median and spread; exit 0 when every run gave a number,
    125 when none did, 1 otherwise."""
    if not (asked.params.get("old") or asked.params.get("from_")):
        asked = asked.with_question(old=commit, new=commit)
    metric = metric_from(replace(asked, bisect=replace(asked.bisect, jobs=1)))
    opts = asked.question
    if opts.backend_name == "local":      # a re-check builds afresh, never a kept build
        opts = replace(opts, rebuild=True)
    sid = f"probe-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    q = ask(opts, say, commit=commit)
    backend = q.backend_or_raise()
    backend.prepare()
    run = asked.run
    bis = q.bisection(Settings(repeat=run.repeat, policy=RepeatPolicy(run.repeat_policy)),
                      metric=metric)
    first = bis.request(sid, 0, 0)
    if asked.bisect.dry_run:
        return print_dry_run([first], backend.dry_run([first]), as_json)
    reqs = [first] if metric is None else [
        replace(first, run_key=str(k), log_dir=first.log_dir.parent / f"run-{k}")
        for k in range(metric.rule.block)]
    outcomes = []
    try:
        for req in reqs:      # one at a time: a measurement has the machine to itself
            outcomes += [out for _, out in backend.run_round([req], lambda r, p: None)]
    except KeyboardInterrupt:
        backend.cancel()
        raise
    if metric is not None:
        return print_measurement(first.commit, metric.name, outcomes, as_json)
    outcome, = outcomes
    stop_if_needed(first, outcome)      # a crash is no verdict here either: exit 2
    code = {"pass": 0, "fail": 1, "skip": 125}[outcome.verdict.value]
    if as_json:
        emit({"commit": first.commit, "verdict": outcome.verdict.value, "exit_code": code,
              "reason": outcome.reason, "logs": {k: str(v) for k, v in outcome.logs.items()}})
        return code
    why = f" ({outcome.reason})" if outcome.reason else ""
    click.echo(f"{first.commit[:12]}: {outcome.verdict.value}{why}")
    for name, path in outcome.logs.items():
        click.echo(f"  {name} log: {path}")
    return code


for command in (status, log, report, forget, gc, slurm, releases, resolve, diff, cache,
                components):
    cli.add_command(command)
install_help_sections(cli)


# The command line as given (for the resume hint), and the signal that stopped it, if one did.
_invocation: dict[str, Any] = {"args": [], "signal": None}


def _on_signal(signum: int, frame: FrameType | None) -> None:
    _invocation["signal"] = signum
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    # Installed, not inherited: a shell starts `bisect-ngc ... &` with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):   # a lost terminal cleans up like Ctrl-C
        signal.signal(sig, _on_signal)
    args = sys.argv[1:] if argv is None else argv
    _invocation.update(args=list(args), signal=None)
    json_output.reset()
    try:
        rv = cli.main(args=args, prog_name="bisect-ngc", standalone_mode=False)
    except UserError as exc:
        return _fail(exc.code, exc.message, exc.hint, **exc.facts)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        if "--json" in args:    # asked for, though parsing stopped before it was read
            json_output.request()
        if not json_output.requested():
            exc.show()
            return exc.exit_code
        return _fail(exc.exit_code, exc.format_message(),
                     "see --help" if isinstance(exc, click.UsageError) else "")
    except (KeyboardInterrupt, click.exceptions.Abort):
        return _fail(EXIT_INTERRUPTED, "interrupted")
    finally:
        release_lanes()
    return rv if isinstance(rv, int) else 0


def _fail(code: int, message: str, hint: str = "", **facts: Any) -> int:
    """One sentence and a hint on stderr; with --json also one object on stdout. An
    interruption by SIGTERM or SIGHUP exits 128 + its number, as shells do; Ctrl-C 130."""
    interrupted = code == EXIT_INTERRUPTED
    if interrupted and _invocation["signal"]:
        code = 128 + _invocation["signal"]
    click.echo(f"error: {message}", err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    if json_output.requested():
        json_output.print_error("interrupted" if interrupted else "error", code,
                                message, hint, **facts)
    return code


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
