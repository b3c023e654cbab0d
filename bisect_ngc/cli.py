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
from .artifacts import ArtifactStore
from .backends import ProbeRequest
from .engine import Bisection, Range, tally
from .errors import (EXIT_AMBIGUOUS, EXIT_FOUND, EXIT_INTERRUPTED, EXIT_INVALID_ENDPOINTS,
                     UserError)
from .history import CommitInfo, History
from .progress import make_events
from .report import render as render_report
from .question import Options, docker_recipe, endpoints, make_backend, open_range
from .releases import UPSTREAM, Catalog
from .releases import containing as releases_containing
from .search import RepeatPolicy, expected_probes, expected_rounds
from .store import StateLock, Store

EXIT_CODES_HELP = """\b
Exit codes:
  0    found the first commit with the new behaviour
  2    bad input (unknown release or revision, no Docker engine, state in use, ...)
  3    invalid endpoints (both behave the same, or one cannot be tested)
  4    ambiguous (untestable commits hide the transition; candidates listed)
  130  interrupted; the state is kept and the same command resumes
"""

VERDICT_HELP = """\b
The test command follows `git bisect run`:
  exit 0 = pass, 125 = cannot test (skip), 1-127 = fail,
  killed by a signal or by --timeout = skip.
A failed build is a skip too. Both commands run in the commit's worktree with
BISECT_COMMIT, BISECT_WORKTREE and BISECT_ARTIFACTS set (in the container too,
with --backend docker, where the test also sees the build's artifacts read-only).
"""

RELEASE_HELP = """\b
Release mode: --from and --to take an NGC release (24.09), an image
(nvcr.io/nvidia/pytorch:24.09-py3) or a commit. The repository is PyTorch
(--torch-repo), the base image is the older release's (--base-image), and each
probe builds a wheel in that image and runs `python -m repro` on it in a fresh
container with the GPUs.
"""


def default_state(state: Path | None = None) -> Path:
    if state is None and os.environ.get("BISECT_NGC_STATE"):
        state = Path(os.environ["BISECT_NGC_STATE"])
    if state is None:
        state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") \
            / "bisect-ngc"
    return state.expanduser().resolve()


def default_cache(cache: Path | None = None) -> Path:
    if cache is None:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        cache = Path(os.environ.get("BISECT_NGC_CACHE") or base / "bisect-ngc")
    return cache.expanduser().resolve()


def _stack(*options):
    def apply(f):
        for opt in reversed(options):
            f = opt(f)
        return f
    return apply


state_option = click.option(
    "--state", type=click.Path(path_type=Path), default=None,
    help="State directory (sessions, probes, logs, result cache). "
         "Default: $BISECT_NGC_STATE or ~/.local/state/bisect-ngc.")
cache_option = click.option(
    "--cache-dir", type=click.Path(path_type=Path), default=None,
    help="Clones, build artifacts, ccache and the release overlay. "
         "Default: $BISECT_NGC_CACHE or ~/.cache/bisect-ngc.")

question_options = _stack(
    click.option("--repo", default=None,
                 help="Local path or clone URL of the repository (generic mode; default .)."),
    click.option("--old", default=None, help="Revision with the old behaviour."),
    click.option("--new", default=None,
                 help="Revision with the new behaviour; the search finds the first commit "
                      "that behaves like it, a fix or a regression alike."),
    click.option("--from", "from_", default=None,
                 help="Release mode: the older NGC release, image or commit."),
    click.option("--to", default=None, help="Release mode: the newer release, image or commit."),
    click.option("--torch-repo", default=UPSTREAM, show_default=True,
                 help="PyTorch sources in release mode: a path, or a URL cloned once "
                      "(blobless) into the cache dir."),
    click.option("--build", default=None, help="Shell command that builds the commit."),
    click.option("--test", default=None,
                 help="Shell command whose exit code is the verdict (release mode: the "
                      "repro by default)."),
    click.option("--timeout", type=float, default=None,
                 help="Seconds one test run may take; past it the run is a skip."),
    click.option("--build-timeout", type=float, default=None,
                 help="Seconds one build may take; past it the commit is a skip."),
    click.option("--no-clean", is_flag=True,
                 help="Local backend: keep untracked files between probes (incremental "
                      "builds); the default is `git clean -ffdx`."),
    click.option("--backend", type=click.Choice(["local", "docker", "slurm"]), default=None,
                 help="Where builds and tests run. Default: docker in release mode, else local."),
    click.option("--image", default=None,
                 help="Docker backend, generic recipe: the image both commands run in."),
    click.option("--base-image", default=None,
                 help="Release mode: build and test in this image instead of the older "
                      "release's."),
    click.option("--cuda-arch", default=None,
                 help="TORCH_CUDA_ARCH_LIST for PyTorch builds. Default: this host's GPU's "
                      "compute capability."),
    click.option("--max-jobs", type=click.IntRange(1, 1024), default=None,
                 help="MAX_JOBS for PyTorch builds. Default: the number of CPUs."),
    click.option("--repro-args", default="",
                 help="Extra flags for `python -m repro` in release mode, e.g. "
                      "'--num-layers 2 --seq-length 4096'."),
    click.option("--gpus", type=click.Choice(["auto", "all", "none"]), default="auto",
                 show_default=True,
                 help="GPUs for test containers: all, none, or auto (all when the engine has "
                      "the nvidia runtime; release mode: all)."),
    click.option("--build-tree/--no-build-tree", default=None,
                 help="Docker backend: mount a persistent build/ directory per worker slot "
                      "into the worktree, so neighbouring commits rebuild incrementally "
                      "(default: on in release mode, off for a generic recipe)."),
    click.option("--repeat", type=click.IntRange(1, 100), default=1, show_default=True,
                 help="Test runs per commit, for flaky repros."),
    click.option("--repeat-policy", type=click.Choice([p.value for p in RepeatPolicy]),
                 default="any", show_default=True,
                 help="any: one failing run makes the commit fail (intermittent failures). "
                      "majority: the commoner of pass/fail wins; a tie is a skip."),
    cache_option,
    state_option,
    click.option("--partition", default=None, help="Slurm: partition for builds (CPU)."),
    click.option("--gpu-partition", default=None,
                 help="Slurm: partition for tests (GPU). Default: --partition."),
    click.option("--account", default=None, help="Slurm: --account for every job."),
    click.option("--qos", default=None, help="Slurm: --qos for every job."),
    click.option("--time", "time_limit", default=None, metavar="LIMIT",
                 help="Slurm: --time for probe jobs, e.g. 4:00:00."),
    click.option("--gpus-per-probe", type=click.IntRange(0, 64), default=1, show_default=True,
                 help="Slurm: GPUs for each test task."),
    click.option("--sbatch-arg", "sbatch_args", multiple=True, metavar="ARG",
                 help="Slurm: extra #SBATCH line for probe jobs (repeatable), e.g. "
                      "--sbatch-arg=--constraint=h100."),
    click.option("--container-runtime", type=click.Choice(["none", "pyxis", "enroot",
                                                            "apptainer"]),
                 default="none", show_default=True,
                 help="Slurm: how probe jobs enter the image (none: bare metal, e.g. modules)."),
    click.option("--shared-dir", type=click.Path(path_type=Path), default=None,
                 help="Slurm: a directory every node sees (worktrees, wheels, verdicts). "
                      "Default: STATE/slurm."),
    click.option("--max-retries", type=click.IntRange(0, 20), default=2, show_default=True,
                 help="Slurm: resubmissions of a probe that was preempted, cancelled or "
                      "lost with its node, before it counts as a skip."),
)

SLURM_KEYS = {"partition": "partition", "gpu_partition": "gpu_partition", "account": "account",
              "qos": "qos", "time_limit": "time", "gpus_per_probe": "gpus_per_probe",
              "sbatch_args": "sbatch_args", "container_runtime": "runtime",
              "shared_dir": "shared_dir", "max_retries": "max_retries"}

QUESTION_KEYS = ("repo", "old", "new", "from_", "to", "torch_repo", "build", "test", "timeout",
                 "build_timeout", "no_clean", "backend", "image", "base_image", "cuda_arch",
                 "max_jobs", "repro_args", "gpus", "build_tree")


def _options(params: dict[str, Any]) -> Options:
    slurm = {SLURM_KEYS[k]: params[k] for k in SLURM_KEYS}
    slurm["sbatch_args"] = list(slurm["sbatch_args"])
    opts = Options(cache_dir=default_cache(params["cache_dir"]),
                   state=default_state(params["state"]), slurm=slurm,
                   **{k: params[k] for k in QUESTION_KEYS})
    opts.check()
    return opts


def _say(text: str) -> None:
    click.echo(f"[bisect-ngc] {text}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="bisect-ngc")
def cli() -> None:
    """Find the upstream commit that changed a repro's behaviour.

    \b
    Between two NGC PyTorch releases (Docker, GPUs and nvcr.io access needed):
      bisect-ngc bisect --from 24.09 --to 24.10
    Any git repository, with a build and a test command:
      bisect-ngc bisect --repo PATH --old GOOD --new BAD --build 'make' --test './check'
    Dry run (candidates, probes, rounds, base image and recipe; builds nothing):
      bisect-ngc plan --from 24.09 --to 24.10
    The release catalog:
      bisect-ngc releases ; bisect-ngc resolve 24.09
    On a Slurm cluster (the controller itself as a batch job):
      bisect-ngc slurm submit --from 24.09 --to 24.10 --partition cpu --gpu-partition gpu
    Sessions and the markdown report:
      bisect-ngc status ; bisect-ngc log ; bisect-ngc report
    """


@cli.command(epilog=EXIT_CODES_HELP + "\n" + VERDICT_HELP + "\n" + RELEASE_HELP)
@question_options
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Probes per round, each in its own worktree; a round splits the range "
                   "into jobs+1 parts.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the result.")
@click.option("--quiet", "-q", is_flag=True, help="No progress display.")
@click.option("--dry-run", is_flag=True,
              help="Print what the next round would run (with --backend slurm: its batch "
                   "scripts) and stop; submits and builds nothing.")
@click.pass_context
def bisect(ctx, jobs, as_json, quiet, dry_run, repeat, repeat_policy, **params):
    """Bisect between two revisions or releases on the first-parent path.

    Both endpoints are tested first. Killed or interrupted, the same command resumes
    where it stopped; verdicts are cached, so a repeated or overlapping bisection reuses
    them, and with --backend docker built wheels are reused across sessions.
    """
    opts = _options(params)
    with StateLock(opts.state):
        store = Store(opts.state)
        catalog = Catalog.load(opts.cache_dir)
        old, new = endpoints(opts, catalog)
        rng = open_range(opts, old, new)
        backend = make_backend(opts, rng, old, new, _say, store)
        for note in opts.notes:
            _say(note)
        if dry_run:
            return _dry_run(Bisection(store, rng, backend, jobs=jobs, repeat=repeat,
                                      policy=RepeatPolicy(repeat_policy)), backend)
        backend.prepare()
        events = make_events(jobs, quiet or as_json and not sys.stderr.isatty())
        bis = Bisection(store, rng, backend, jobs=jobs, repeat=repeat,
                        policy=RepeatPolicy(repeat_policy), events=events,
                        extra={"probe_argv": _probe_argv(ctx)})
        try:
            summary = bis.run()
        except KeyboardInterrupt:
            sid = bis.session.id if bis.session else None
            if sid:
                _write_report(store, sid, opts.cache_dir)
            raise UserError(f"interrupted; session {sid} is kept in {opts.state}",
                            hint="run the same command again to resume",
                            code=EXIT_INTERRUPTED) from None
        written = _write_report(store, summary["session"], opts.cache_dir)
    infos = rng.history.info([s for s in (summary["first_new"], summary["last_old"]) if s])
    first = infos.get(summary["first_new"] or "")
    summary.update(first_new_title=first.title if first else None,
                   first_new_pr=first.pr if first else None,
                   report=str(written.markdown) if written else None)
    if as_json:
        click.echo(json.dumps(summary))
    else:
        _print_summary(summary, infos, _probe_argv(ctx))
        if written:
            click.echo(f"Report: {written.markdown}")
    return {"found": EXIT_FOUND, "ambiguous": EXIT_AMBIGUOUS,
            "invalid-endpoints": EXIT_INVALID_ENDPOINTS}[summary["status"]]


def _write_report(store: Store, sid: str, cache_dir: Path):
    """Write the session's report; a report that fails must not lose the answer."""
    try:
        return render_report(store, sid, cache_dir=cache_dir)
    except Exception as exc:  # noqa: BLE001
        _say(f"could not write the report: {type(exc).__name__}: {exc}")
        return None


def _dry_run(bis: Bisection, backend) -> int:
    step = bis.peek()
    if not isinstance(step, list):
        click.echo(f"nothing to run: the stored verdicts already give the result "
                   f"({step.status.value})")
        return 0
    click.echo(f"next round: {len(step)} probe(s): " +
               ", ".join(f"{r.commit[:12]} [{r.index}]" for r in step))
    for name, script in getattr(backend, "dry_run", lambda reqs: [])(step):
        click.echo(f"\n# ---- {name} ----\n{script}")
    return 0


def _probe_argv(ctx: click.Context, command: str = "probe",
                drop: tuple[str, ...] = ()) -> list[str]:
    """The command line of this question for another subcommand: by default the
    `bisect-ngc probe` that re-runs one probe (add --commit)."""
    argv = ["bisect-ngc", command]
    skip = {"jobs", "as_json", "quiet", "dry_run", "controller_partition", "controller_time",
            *drop}
    for param in ctx.command.params:
        if param.name in skip or not isinstance(param, click.Option):
            continue
        value = ctx.params.get(param.name)
        if value is None or value == param.default or value is False or value == ():
            continue
        flag = param.opts[0]
        if param.name in ("state", "cache_dir"):
            value = str(Path(value).expanduser().resolve())
        if isinstance(value, tuple):
            for item in value:
                argv += [f"{flag}={item}"]
            continue
        argv += [flag] if value is True else [flag, str(value)]
    return argv


def _print_summary(summary: dict[str, Any], infos: dict[str, CommitInfo],
                   probe_argv: list[str]) -> None:
    status = summary["status"]
    tally_line = (f"{summary['probes']} probe(s), {summary['cached']} from cache, "
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
        click.echo(tally_line)
        click.echo("Reproduce the verdicts:")
        for info in (first, last):
            if info:
                click.echo("  " + shlex.join(probe_argv + ["--commit", info.sha]))
    elif status == "ambiguous":
        click.echo(f"Ambiguous: {summary['explanation']}. The first new-behaviour commit is "
                   "one of:")
        for sha in summary["candidates"]:
            click.echo(f"  {sha}")
        click.echo(tally_line)
    else:
        click.echo(f"Invalid endpoints: {summary['explanation']}.")
        click.echo(tally_line)


@cli.command(epilog=VERDICT_HELP + "\n" + RELEASE_HELP)
@question_options
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--brief", is_flag=True, help="Leave out the rendered build and test scripts.")
@click.option("--json", "as_json", is_flag=True)
def plan(jobs, brief, as_json, repeat, repeat_policy, **params):
    """Dry run: candidates, expected probes and rounds, base image and recipe. Builds
    nothing and starts no container."""
    opts = _options(params)
    catalog = Catalog.load(opts.cache_dir)
    old, new = endpoints(opts, catalog)
    out: dict[str, Any] = {"backend": opts.backend_name, "jobs": jobs, "repeat": repeat,
                           "endpoints": {}}
    for side, ep in (("old", old), ("new", new)):
        out["endpoints"][side] = {"label": ep.label, "kind": ep.kind, "rev": ep.rev,
                                  "image": ep.image,
                                  "release": ep.release.as_dict() if ep.release else None}
    try:
        rng = open_range(opts, old, new)
    except UserError as exc:
        if not opts.release_mode:
            raise
        out.update(candidates=None, candidates_error=f"{exc.message} ({exc.hint})")
    else:
        n = len(rng.candidates)
        infos = rng.history.info([rng.old, rng.new])
        out.update(candidates=n, expected_rounds=expected_rounds(n, jobs),
                   expected_probes=expected_probes(n, jobs) * repeat)
        for side, sha in (("old", rng.old), ("new", rng.new)):
            out["endpoints"][side].update(commit=sha, title=infos[sha].title)
    if opts.backend_name == "docker":
        recipe = docker_recipe(opts, old, new)
        out["recipe"] = {"base_image": recipe.image, "build_image": recipe.build_image or
                         recipe.image, "build": recipe.build, "test": recipe.test,
                         "build_dockerfile": recipe.build_dockerfile,
                         "settings": recipe.build_settings, "gpus": recipe.gpus}
    else:
        out["recipe"] = {"build": opts.build, "test": opts.test}
    out["notes"] = opts.notes
    if as_json:
        click.echo(json.dumps(out))
        return 0
    _print_plan(out, brief)
    return 0


def _print_plan(out: dict[str, Any], brief: bool) -> None:
    for side in ("old", "new"):
        ep = out["endpoints"][side]
        rel = ep["release"]
        what = f"release {rel['name']} ({ep['image']}, torch {rel['torch_version']})" if rel \
            else ep["label"]
        commit = ep.get("commit") or ep["rev"]
        title = f" {ep['title']}" if ep.get("title") else ""
        click.echo(f"{side}: {what}\n     commit {commit}{title}")
    if out.get("candidates") is None:
        click.echo(f"candidates: unknown: {out.get('candidates_error')}")
    else:
        click.echo(f"{out['candidates']} candidates on the first-parent path; without skips "
                   f"expect {out['expected_rounds']} round(s), at most "
                   f"{out['expected_probes']} probe(s) with --jobs {out['jobs']}")
    recipe = out["recipe"]
    click.echo(f"backend: {out['backend']}")
    if out["backend"] == "docker":
        click.echo(f"base image: {recipe['base_image']}")
        click.echo(f"build image: {recipe['build_image']}")
        for key, value in sorted(recipe["settings"].items()):
            click.echo(f"  {key}: {value}")
    if brief and out["backend"] == "docker":
        click.echo("(without --brief: the rendered build and test scripts)")
    else:
        click.echo(f"build:\n{_indent(recipe['build'])}\ntest:\n{_indent(recipe['test'])}")
        if recipe.get("build_dockerfile"):
            click.echo(f"build image Dockerfile:\n{_indent(recipe['build_dockerfile'])}")
    for note in out["notes"]:
        click.echo(f"note: {note}")


def _indent(text: str | None) -> str:
    return "\n".join("    " + line for line in (text or "(none)").rstrip().splitlines())


@cli.command(epilog=VERDICT_HELP)
@question_options
@click.option("--commit", required=True, help="The revision to build and test.")
def probe(commit, repeat, repeat_policy, **params):
    """Build and test one commit now, bypassing the result cache, and exit with its
    verdict: 0 pass, 1 fail, 125 skip. Takes the same options as `bisect`, which prints
    the probe commands that re-check its answer."""
    if not (params["old"] or params["from_"]):
        params.update(old=commit, new=commit)
    opts = _options(params)
    with StateLock(opts.state):
        store = Store(opts.state)
        old, new = endpoints(opts, Catalog.load(opts.cache_dir))
        spec = opts.torch_repo if opts.release_mode else (opts.repo or ".")
        history = History.open(spec, opts.cache_dir)
        sha = history.resolve(commit)
        rng = Range(history, sha, sha, [sha], history.identity(sha), {"commit": commit})
        backend = make_backend(opts, rng, old, new, _say, store)
        backend.prepare()
        sid = f"probe-{time.strftime('%Y%m%d-%H%M%S')}"
        req = ProbeRequest(session=sid, commit=sha, index=0, slot=0, runs=repeat,
                           policy=RepeatPolicy(repeat_policy),
                           log_dir=store.root / "logs" / sid / sha[:12],
                           artifacts=store.root / "artifacts" / "probe" / sha)
        try:
            (_, outcome), = list(backend.run_round([req], lambda r, p: None))
        except KeyboardInterrupt:
            backend.cancel()
            raise
    why = f" ({outcome.reason})" if outcome.reason else ""
    click.echo(f"{sha[:12]}: {outcome.verdict.value}{why}")
    for name, path in outcome.logs.items():
        click.echo(f"  {name} log: {path}")
    return {"pass": 0, "fail": 1, "skip": 125}[outcome.verdict.value]


@cli.command()
@state_option
@cache_option
@click.option("--session", default=None, help="Session id or prefix (default: the latest).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Where to write the markdown (default: STATE/reports/SESSION.md); the "
                   "narrowing picture goes next to it.")
def report(state, cache_dir, session, output):
    """Render a session's markdown report, finished or still running.

    The report says which commit changed the behaviour (with its PR), how sure that is
    (the verdicts of the commit and its parent), every probe, how the range narrowed,
    which releases ship the commit, and the commands that re-check it. Paths are relative
    to the state directory, so it can be pasted into a bug thread as it is.
    """
    store = Store(default_state(state))
    written = render_report(store, session, output, cache_dir=default_cache(cache_dir))
    click.echo(str(written.markdown))
    return 0


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


# --- the controller as a batch job ----------------------------------------------------

@cli.group()
def slurm():
    """Run whole bisections on a Slurm cluster."""


@slurm.command("submit", epilog=RELEASE_HELP)
@question_options
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--controller-partition", default=None,
              help="Partition for the controller job (default: --partition).")
@click.option("--controller-time", default="2-00:00:00", show_default=True,
              help="Time limit of the controller job.")
@click.pass_context
def slurm_submit(ctx, jobs, controller_partition, controller_time, repeat, repeat_policy,
                 **params):
    """Submit the controller itself as a small CPU job, so a whole bisection runs
    unattended with --backend slurm. Prints the job id and where the report will be.
    The controller is requeued on preemption and re-attaches to its probe jobs."""
    params["backend"] = "slurm"
    opts = _options(params)
    store = Store(opts.state)
    catalog = Catalog.load(opts.cache_dir)
    old, new = endpoints(opts, catalog)
    rng = open_range(opts, old, new)
    backend = make_backend(opts, rng, old, new, _say, store)
    backend.prepare()
    bis = Bisection(store, rng, backend, jobs=jobs, repeat=repeat,
                    policy=RepeatPolicy(repeat_policy))
    sid, _ = bis.predicted_session()
    argv = [sys.executable, "-m", "bisect_ngc", "bisect", "--backend", "slurm", "--quiet",
            "--jobs", str(jobs)] + _probe_argv(ctx, "bisect", drop=("backend",))[2:]
    from .backends.slurm import render_controller
    shared = backend.s.shared_dir
    script = shared / "controller" / f"{sid}.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(render_controller(
        name=f"bisect-ngc-controller-{sid}", partition=controller_partition or opts.slurm[
            "partition"], account=opts.slurm["account"], qos=opts.slurm["qos"],
        time=controller_time, extra=opts.slurm["sbatch_args"],
        out=str(script.with_suffix(".out")), cwd=os.getcwd(), argv=shlex.join(argv)))
    job = backend.sched.run(["sbatch", "--parsable", str(script)], what="sbatch").strip()
    click.echo(f"submitted controller job {job.split(';')[0]} for session {sid}")
    click.echo(f"log: {script.with_suffix('.out')}")
    click.echo(f"report: {opts.state / 'reports' / (sid + '.md')}")
    return 0


# --- the release catalog ------------------------------------------------------------

@cli.command()
@click.option("--containing", default=None, metavar="SHA",
              help="List the releases whose PyTorch commit contains SHA (needs the PyTorch "
                   "repository: --torch-repo).")
@click.option("--torch-repo", default=UPSTREAM, show_default=True)
@cache_option
@click.option("--json", "as_json", is_flag=True)
def releases(containing, torch_repo, cache_dir, as_json):
    """The NGC PyTorch release catalog: image, torch version and commit, CUDA, TE, Python.

    Verification: V2 = two public copies agree, V1 = one, U = unverified, live = read
    from the image with `resolve --image`. Releases that ship the same commit are marked.
    """
    cache = default_cache(cache_dir)
    catalog = Catalog.load(cache)
    rows = []
    shipped: dict[str, str] = {}
    if containing:
        history = History.open(torch_repo, cache)
        sha = history.resolve(containing)
        shipped = {r["release"]: r["contains"] for r in releases_containing(history, sha, catalog)}
    for rel in catalog.all():
        row = rel.as_dict()
        row["same_commit_as"] = catalog.same_commit(rel)
        if containing:
            row["contains"] = shipped[rel.name]
        rows.append(row)
    if as_json:
        click.echo(json.dumps(rows))
        return 0
    from rich.console import Console
    from rich.table import Table
    table = Table(title="NGC PyTorch releases" + (f" containing {containing}" if containing
                                                   else ""))
    for col in ["release", "torch", "commit", "CUDA", "TE", "Python", "note"] + \
            (["contains"] if containing else []):
        table.add_column(col)
    for row in rows:
        note = f"same commit as {', '.join(row['same_commit_as'])}" if row["same_commit_as"] \
            else ""
        cells = [row["name"], f"{row['torch_version'] or '?'} [{row['torch_verified']}]",
                 row["torch_commit"][:12] or "?", f"{row['cuda'] or '?'} [{row['cuda_verified']}]",
                 f"{row['transformer_engine'] or '?'} [{row['te_verified']}]",
                 row["python"] or "?", note]
        if containing:
            cells.append(row["contains"])
        table.add_row(*cells)
    Console(width=None if sys.stdout.isatty() else 140).print(table)
    if containing:
        first = next((r["name"] for r in rows if r["contains"] == "yes"), None)
        click.echo(f"first shipped in NGC {first}" if first else
                   "not shipped in any release of the catalog")
    return 0


@cli.command()
@click.argument("release", required=False)
@click.option("--image", default=None, help="Read the facts live from this image (needs Docker).")
@cache_option
@click.option("--json", "as_json", is_flag=True)
def resolve(release, image, cache_dir, as_json):
    """Print one release's facts, or read them live from an image.

    With --image the image is run once (python -c ...) to read torch.__version__,
    torch.version.git_version, torch.version.cuda and the TE version; the result goes
    into the local catalog overlay, so --from/--to accept that image afterwards.
    """
    cache = default_cache(cache_dir)
    catalog = Catalog.load(cache)
    if bool(release) == bool(image):
        raise UserError("give either a release (e.g. 24.09) or --image IMAGE",
                        hint="bisect-ngc resolve 24.09, or bisect-ngc resolve --image IMG")
    if image:
        from .backends.docker import read_image_facts
        from .releases import release_from_facts
        rel = release_from_facts(image, read_image_facts(image, _say))
        catalog.remember(rel)
    else:
        rel = catalog.get(release)
    row = dict(rel.as_dict(), same_commit_as=catalog.same_commit(rel))
    if as_json:
        click.echo(json.dumps(row))
        return 0
    width = max(len(k) for k in row)
    for key, value in row.items():
        if isinstance(value, list):
            value = ", ".join(value) or "-"
        click.echo(f"{key:<{width}}  {value if value != '' else '?'}")
    return 0


# --- the artifact cache ---------------------------------------------------------------

@cli.group()
def cache():
    """Built artifacts (wheels), shared across sessions and backends."""


@cache.command("ls")
@cache_option
@click.option("--json", "as_json", is_flag=True)
def cache_ls(cache_dir, as_json):
    """List the stored builds: key, commit, image, age, size."""
    store = ArtifactStore(default_cache(cache_dir) / "artifacts")
    rows = [{"key": a.key, "commit": a.meta.get("commit"), "image": a.meta.get("image"),
             "created": a.meta.get("created"), "build_s": a.meta.get("build_s"),
             "bytes": a.size} for a in store.entries()]
    if as_json:
        click.echo(json.dumps(rows))
        return 0
    if not rows:
        click.echo(f"no artifacts in {store.root}")
    for r in rows:
        age = (time.time() - (r["created"] or 0)) / 86400
        click.echo(f"{r['key']}  {str(r['commit'])[:12]}  {r['image']}  {age:.1f} days  "
                   f"{r['bytes'] / 2**20:.1f} MiB")
    return 0


@cache.command("prune")
@cache_option
@click.option("--older-than", type=click.FloatRange(min=0), default=None, metavar="DAYS",
              help="Remove only builds older than this many days.")
@click.option("--all", "everything", is_flag=True, help="Remove every build.")
def cache_prune(cache_dir, older_than, everything):
    """Remove stored builds: those older than --older-than DAYS, or --all."""
    if older_than is None and not everything:
        raise UserError("say what to remove: --older-than DAYS or --all",
                        hint="bisect-ngc cache ls shows what is there")
    store = ArtifactStore(default_cache(cache_dir) / "artifacts")
    count, freed = store.prune(None if everything else older_than * 86400)
    click.echo(f"removed {count} build(s), {freed / 2**20:.1f} MiB" if count
               else "nothing to remove")
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
