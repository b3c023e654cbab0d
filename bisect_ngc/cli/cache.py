"""`cache ls` and `cache prune`: the built artifacts."""
from __future__ import annotations

import time

from pathlib import Path

import click

from ..core.artifacts import ArtifactStore
from ..errors import UserError
from .help_sections import RichGroup
from .json_output import emit, json_option
from ..core.kept_builds import kept_builds, prune_kept
from ..question.flags import default_cache, default_state
from ..question.options import option


@click.group(cls=RichGroup)
def cache() -> None:
    """Built artifacts, shared across sessions: the artifact store of the docker and slurm
    backends (wheels, CACHE/artifacts), and the local backend's kept builds
    (STATE/artifacts)."""


@cache.command("ls")
@option("cache_dir")
@option("state")
@json_option
def cache_ls(cache_dir: Path | None, state: Path | None, as_json: bool) -> int:
    """List the stored builds: where (the docker and slurm backends' artifact store, or
    the local backend's kept builds), key, commit, image, age, size."""
    store = ArtifactStore(default_cache(cache_dir) / "artifacts")
    rows = [{"store": "artifacts", "key": a.key, "commit": a.meta.get("commit"),
             "image": a.meta.get("image"), "created": a.meta.get("created"),
             "build_s": a.meta.get("build_s"), "bytes": a.size, "path": str(a.path)}
            for a in store.entries()] + kept_builds(default_state(state))
    if as_json:
        emit(rows)
        return 0
    click.echo(f"docker and slurm builds (the artifact store): {store.root}")
    click.echo(f"local builds (kept per commit and build): "
               f"{default_state(state) / 'artifacts'}")
    if not rows:
        click.echo("no builds in either")
    for r in rows:
        age = (time.time() - (r["created"] or 0)) / 86400
        click.echo(f"{r['store']:<9}  {r['key']}  {str(r['commit'])[:12]}  {r['image'] or '-'}  "
                   f"{age:.1f} days  {r['bytes'] / 2**20:.1f} MiB")
    return 0


@cache.command("prune")
@option("cache_dir")
@option("state")
@click.option("--older-than", type=click.FloatRange(min=0), default=None, metavar="DAYS",
              help="Remove only builds older than this many days.")
@click.option("--all", "everything", is_flag=True, help="Remove every build.")
def cache_prune(cache_dir: Path | None, state: Path | None, older_than: float | None,
                everything: bool) -> int:
    """Remove stored builds, from the artifact store and the kept local builds: those
    older than --older-than DAYS, or --all."""
    if older_than is None and not everything:
        raise UserError("say what to remove: --older-than DAYS or --all",
                        hint="bisect-ngc cache ls shows what is there")
    store = ArtifactStore(default_cache(cache_dir) / "artifacts")
    age = None if everything or older_than is None else older_than * 86400
    count, freed = store.prune(age)
    local, local_freed = prune_kept(default_state(state), age)
    count, freed = count + local, freed + local_freed
    click.echo(f"removed {count} build(s), {freed / 2**20:.1f} MiB" if count
               else "nothing to remove")
    return 0
