"""`slurm submit`: the controller itself as a batch job."""
from __future__ import annotations

import sys

import click

from ..progress import say
from ..question import (RELEASE_HELP, ask, command_line, options_from, question_options,
                        run_settings)


@click.group()
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
    opts = options_from(params)
    q = ask(opts, say)
    q.backend.prepare()
    sid, _ = q.bisection(run_settings(ctx, jobs, repeat, repeat_policy, False)).predicted_session()
    argv = [sys.executable, "-m", "bisect_ngc", "bisect", "--backend", "slurm", "--quiet",
            "--jobs", str(jobs)] + command_line(ctx, "bisect", ("backend",), redact=False)[2:]
    job, out = q.backend.submit_controller(sid, argv, partition=controller_partition,
                                           time_limit=controller_time)
    click.echo(f"submitted controller job {job} for session {sid}")
    click.echo(f"log: {out}")
    click.echo(f"report: {opts.state / 'reports' / (sid + '.md')}")
    return 0
