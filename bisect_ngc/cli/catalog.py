"""`releases` and `resolve`: the NGC release catalog."""
from __future__ import annotations

import re
import sys

from pathlib import Path

import click

from ..errors import UserError
from .help_sections import RichCommand
from ..vcs.history import History
from .json_output import emit, json_option
from .progress import say
from ..question.flags import default_cache
from ..question.options import option
from ..images.releases import Catalog, release_from_config
from ..images.releases import containing as releases_containing

NGC_REPOSITORY = "nvcr.io/nvidia/pytorch"
RELEASE_TAG_RE = re.compile(r"^\d{2}\.\d{2}-py3$")


@click.command(cls=RichCommand)
@click.option("--containing", default=None, metavar="SHA",
              help="List the releases whose PyTorch commit contains SHA (needs the PyTorch "
                   "repository: --torch-repo).")
@click.option("--refresh", is_flag=True,
              help="Read every release tag's config from the registry first (no pull) and "
                   "keep its facts in the local overlay: torch and its commit, CUDA, cuDNN, "
                   "NCCL, cuBLAS, Triton, TE.")
@click.option("--repository", default=NGC_REPOSITORY, show_default=True, metavar="REPO",
              help="With --refresh: the repository whose YY.MM-py3 tags are the releases.")
@option("torch_repo")
@option("cache_dir")
@json_option
def releases(containing: str | None, refresh: bool, repository: str, torch_repo: str,
             cache_dir: Path | None, as_json: bool) -> int:
    """The NGC PyTorch release catalog: image, torch version and commit, CUDA, TE, Python.

    Verification: V2 = two public copies agree, V1 = one, U = unverified, live = read
    from the image with `resolve --image`, registry = read from its config (--refresh).
    Releases that ship the same commit are marked.
    """
    cache = default_cache(cache_dir)
    catalog = Catalog.load(cache)
    if refresh:
        _refresh(catalog, cache, repository)
    rows = []
    shipped: dict[str, str] = {}
    named = catalog.naming(containing) if containing else []
    from_catalog = bool(named) and not History.at_hand(torch_repo, cache)
    if from_catalog:     # no clone for what the catalog itself says
        shipped = {rel.name: "yes" if rel in named else "unknown" for rel in catalog.all()}
    elif containing:
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
        emit(rows)
        return 0
    _print_table(rows, containing)
    if from_catalog:
        click.echo(f"shipped in NGC {', '.join(r.name for r in named)}, whose PyTorch commit "
                   f"the catalog names; whether an earlier release has it needs the PyTorch "
                   f"repository (clone it once with --torch-repo, or give a local path)")
    elif containing:
        first = next((r["name"] for r in rows if r["contains"] == "yes"), None)
        click.echo(f"first shipped in NGC {first}" if first else
                   "not shipped in any release of the catalog")
    return 0


@click.command(cls=RichCommand)
@click.argument("release", required=False)
@option("image", help="Read the facts live from this image (needs Docker).")
@option("cache_dir")
@json_option
def resolve(release: str | None, image: str | None, cache_dir: Path | None,
            as_json: bool) -> int:
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
        from ..backends.docker.engine import read_image_facts
        from ..images.releases import release_from_facts
        rel = release_from_facts(image, read_image_facts(image, say))
        catalog.remember(rel)
    else:
        rel = catalog.get(release or "")
    row = dict(rel.as_dict(), same_commit_as=catalog.same_commit(rel))
    if as_json:
        emit(row)
        return 0
    width = max(len(k) for k in row)
    for key, value in row.items():
        if isinstance(value, list):
            value = ", ".join(value) or "-"
        click.echo(f"{key:<{width}}  {value if value != '' else '?'}")
    return 0


def _refresh(catalog: Catalog, cache: Path, repository: str) -> None:
    """Each YY.MM-py3 tag's config, read from the registry, into the overlay."""
    from ..images.registry import Registry     # requests and oras: only when asked
    registry = Registry(cache)
    tags = sorted(t for t in registry.tags(repository) if RELEASE_TAG_RE.match(t))
    if not tags:
        raise UserError(f"{repository} has no release tags (YY.MM-py3)",
                        hint="name the repository of the releases with --repository")
    for tag in tags:
        name = tag.removesuffix("-py3")
        _, config = registry.config(f"{repository}:{tag}")
        known = catalog.get(name) if name in catalog.names() else None
        rel = release_from_config(name, f"{repository}:{tag}", config, known)
        if known and known.torch_commit and rel.torch_commit and \
                not known.torch_commit.startswith(rel.torch_commit[:7]):
            say(f"{name}: the config names torch commit {rel.torch_commit[:12]}, the catalog "
                f"had {known.torch_commit[:12]}; the config's is kept")
        catalog.remember(rel)
        say(f"{name}: torch {rel.torch_version or '?'}, CUDA {rel.cuda or '?'}, "
            f"TE {rel.transformer_engine or '?'} (from the registry)")


def _print_table(rows: list[dict], containing: str | None) -> None:
    from rich.console import Console
    from rich.table import Table
    table = Table(title="NGC PyTorch releases" + (f" containing {containing}" if containing
                                                   else ""))
    read = [k for k in ("cudnn", "nccl") if any(r.get(k) for r in rows)]    # --refresh's
    for col in ["release", "torch", "commit", "CUDA", *({"cudnn": "cuDNN", "nccl": "NCCL"}[k]
                                                        for k in read),
                "TE", "Python", "note"] + (["contains"] if containing else []):
        table.add_column(col)
    # One width for the column: some releases are known by a short prefix only.
    width = min([len(r["torch_commit"]) for r in rows if r["torch_commit"]] + [12])
    for row in rows:
        note = f"same commit as {', '.join(row['same_commit_as'])}" if row["same_commit_as"] \
            else ""
        cells = [row["name"], f"{row['torch_version'] or '?'} [{row['torch_verified']}]",
                 row["torch_commit"][:width] or "?", f"{row['cuda'] or '?'} [{row['cuda_verified']}]",
                 *(row[k] or "?" for k in read), _te(row),
                 row["python"] or "?", note]
        if containing:
            cells.append(row["contains"])
        table.add_row(*cells)
    Console(width=None if sys.stdout.isatty() else 140).print(table)


def _te(row: dict) -> str:
    """TE's version, with its commit where the catalog knows one the version lacks."""
    version, commit = row["transformer_engine"] or "?", row["te_commit"]
    shown = version if not commit or commit in version else f"{version} ({commit[:10]})"
    return f"{shown} [{row['te_verified']}]"
