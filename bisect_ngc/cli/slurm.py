"""`slurm submit`: the controller itself as a batch job."""
from __future__ import annotations

import shlex
import sys

import click

from .help_sections import RichGroup, epilog
from .json_output import emit, json_option
from ..question.metric import metric_from
from .progress import say
from ..question.options import BISECTION, options
from ..question.rules import options_from
from ..question.wiring import RELEASE_HELP, ask, command_line, run_settings


@click.group(cls=RichGroup)
def slurm():
    """Run whole bisections on a Slurm cluster."""


@slurm.command("submit", epilog=epilog(RELEASE_HELP))
@options(*BISECTION)
@click.option("--controller-partition", help="Partition for the controller job (default: "
              "--partition).")
@click.option("--controller-time", default="2-00:00:00", show_default=True,
              help="Time limit of the controller job.")
@json_option
@click.pass_context
def slurm_submit(ctx, jobs, controller_partition, controller_time, repeat, repeat_policy,
                 max_skips, quiet, dry_run, as_json, **params):
    """Submit the controller itself as a small CPU job, so a whole bisection runs
    unattended with --backend slurm. Prints the job id and where the report will be.
    The controller is requeued on preemption and re-attaches to its probe jobs. Takes a
    `bisect` command line as it is; with --dry-run it prints the controller's command and
    submits nothing."""
    metric = metric_from(ctx, params, jobs=jobs, repeat=repeat, repeat_policy=repeat_policy)
    params["backend"] = "slurm"
    opts = options_from(params)
    q = ask(opts, say)
    sid, _ = q.bisection(run_settings(ctx, jobs, repeat, repeat_policy, False),
                         metric=metric).predicted_session()
    argv = [sys.executable, "-m", "bisect_ngc", "bisect", "--backend", "slurm", "--quiet",
            "--jobs", str(jobs)] + command_line(ctx, "bisect", ("backend",), redact=False)[2:]
    report = opts.state / "reports" / (sid + ".md")
    if dry_run:
        if as_json:
            emit({"status": "dry-run", "session": sid, "command": argv, "report": str(report)})
        else:
            click.echo(f"would submit the controller of session {sid}: {shlex.join(argv)}")
        return 0
    q.backend.prepare()
    job, out = q.backend.submit_controller(sid, argv, partition=controller_partition,
                                           time_limit=controller_time)
    if as_json:
        emit({"job": job, "session": sid, "log": str(out), "report": str(report)})
        return 0
    click.echo(f"submitted controller job {job} for session {sid}")
    click.echo(f"log: {out}")
    click.echo(f"report: {report}")
    return 0
