"""`slurm submit`: the controller itself as a batch job."""
from __future__ import annotations

import sys

import click

from ..progress import say
from ..options import QUESTION, options, options_from
from ..question import RELEASE_HELP, ask, command_line, run_settings


@click.group()
def slurm():
    """Run whole bisections on a Slurm cluster."""


@slurm.command("submit", epilog=RELEASE_HELP)
@options(*QUESTION, "jobs", "submit")
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
