"""`slurm submit`: the controller itself as a batch job."""
from __future__ import annotations

import shlex
import sys

import click

from .help_sections import RichGroup, epilog
from .json_output import emit, json_option
from ..question.metric import metric_from
from .progress import say
from ..question.options import BISECTION, option
from ..question.rules import Asked, asked_options
from ..question.wiring import ask, command_line, run_settings
from .help_texts import RELEASE_HELP


@click.group(cls=RichGroup)
def slurm() -> None:
    """Run whole bisections on a Slurm cluster."""


@slurm.command("submit", epilog=epilog(RELEASE_HELP))
@asked_options(*BISECTION)
@option("controller_partition")
@option("controller_time")
@json_option
def slurm_submit(ctx: click.Context, asked: Asked, controller_partition: str | None,
                 controller_time: str, as_json: bool) -> int:
    """Submit the controller itself as a small CPU job, so a whole bisection runs
    unattended with --backend slurm. Prints the job id and where the report will be.
    The controller is requeued on preemption and re-attaches to its probe jobs. Takes a
    `bisect` command line as it is; with --dry-run it prints the controller's command and
    submits nothing."""
    metric = metric_from(asked)
    asked = asked.with_question(backend="slurm")
    opts = asked.question
    q = ask(opts, say)
    sid, _ = q.bisection(run_settings(asked, ctx), metric=metric).predicted_session()
    argv = [sys.executable, "-m", "bisect_ngc", "bisect", "--backend", "slurm", "--quiet",
            "--jobs", str(asked.bisect.jobs)] + \
        command_line(ctx, "bisect", ("backend",), redact=False)[2:]
    report = opts.state / "reports" / (sid + ".md")
    if asked.bisect.dry_run:
        if as_json:
            emit({"status": "dry-run", "session": sid, "command": argv, "report": str(report)})
        else:
            click.echo(f"would submit the controller of session {sid}: {shlex.join(argv)}")
        return 0
    backend = q.backend_or_raise()
    backend.prepare()
    job, out = backend.submit_controller(sid, argv, partition=controller_partition,
                                           time_limit=controller_time)
    if as_json:
        emit({"job": job, "session": sid, "log": str(out), "report": str(report)})
        return 0
    click.echo(f"submitted controller job {job} for session {sid}")
    click.echo(f"log: {out}")
    click.echo(f"report: {report}")
    return 0
