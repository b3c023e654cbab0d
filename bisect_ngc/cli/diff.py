"""`diff A B`: what two images differ in, read from their registry with no layer pulled."""
from __future__ import annotations

from pathlib import Path

import click

from ..images.image_config import diff as config_diff
from ..images.releases import RELEASE_RE, Catalog
from ..question.flags import default_cache
from ..question.options import option
from .help_sections import RichCommand
from .json_output import emit, json_option


@click.command(cls=RichCommand)
@click.argument("a")
@click.argument("b")
@click.option("--platform", default="linux/amd64", show_default=True, metavar="OS/ARCH",
              help="The image of a multi-platform tag to read.")
@option("cache_dir")
@json_option
def diff(a: str, b: str, platform: str, cache_dir: Path | None, as_json: bool) -> int:
    """What two images differ in: CUDA and its libraries, NCCL, Transformer Engine,
    Triton, PyTorch (with its commit), and the environment defaults that change behaviour.

    A and B are NGC releases (24.09) or image references (nvcr.io/nvidia/pytorch:24.10-py3,
    localhost:5000/my/image:tag). Only each image's config is read from its registry (a few
    KB, cached by digest): nothing is pulled. Logins are those of `docker login`.
    """
    from ..images.registry import Registry     # requests and oras: only for this command
    cache = default_cache(cache_dir)
    catalog = Catalog.load(cache)
    images = [catalog.get(x).image if RELEASE_RE.match(x) else x for x in (a, b)]
    registry = Registry(cache, platform)
    for image in images:                    # both named right before either is read
        registry.reference(image)
    (da, ca), (db, cb) = (registry.config(image) for image in images)
    rows = config_diff(ca, cb)
    if as_json:
        emit({"a": {"image": images[0], "config": da}, "b": {"image": images[1], "config": db},
              "differ": [{"name": r.name, "a": r.a, "b": r.b, "kind": r.kind} for r in rows]})
        return 0
    click.echo(f"A  {images[0]}  ({da[:19]})\nB  {images[1]}  ({db[:19]})")
    if not rows:
        click.echo("no component or default differs in what their configs say")
        return 0
    width = max(len(r.name) for r in rows)
    wa = max(len(r.a or "-") for r in rows)
    for kind, title in (("component", "components"), ("default", "environment defaults")):
        chosen = [r for r in rows if r.kind == kind]
        if chosen:
            click.echo(f"\n{title}:")
            for r in chosen:
                click.echo(f"  {r.name:<{width}}  {r.a or '-':<{wa}}  ->  {r.b or '-'}")
    return 0
