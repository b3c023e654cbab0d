"""`cache ls` and `cache prune`: the built artifacts."""
from __future__ import annotations

import time

import click

from ..core.artifacts import ArtifactStore
from ..errors import UserError
from .help_sections import RichGroup
from .json_output import emit, json_option
from ..question.options import default_cache, option


@click.group(cls=RichGroup)
def cache():
    """Built artifacts (wheels), shared across sessions and backends."""


@cache.command("ls")
@option("cache_dir")
@json_option
def cache_ls(cache_dir, as_json):
    """List the stored builds: key, commit, image, age, size."""
    store = ArtifactStore(default_cache(cache_dir) / "artifacts")
    rows = [{"key": a.key, "commit": a.meta.get("commit"), "image": a.meta.get("image"),
             "created": a.meta.get("created"), "build_s": a.meta.get("build_s"),
             "bytes": a.size} for a in store.entries()]
    if as_json:
        emit(rows)
        return 0
    if not rows:
        click.echo(f"no artifacts in {store.root}")
    for r in rows:
        age = (time.time() - (r["created"] or 0)) / 86400
        click.echo(f"{r['key']}  {str(r['commit'])[:12]}  {r['image']}  {age:.1f} days  "
                   f"{r['bytes'] / 2**20:.1f} MiB")
    return 0


@cache.command("prune")
@option("cache_dir")
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
