"""The NGC PyTorch release catalog: release -> image, torch version and upstream commit.

The packaged TSV holds the public facts with how well each is verified; facts read live
from an image (`bisect-ngc resolve --image`) go to an overlay in the cache directory and
take precedence.
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
from dataclasses import asdict, dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Iterable

from ..errors import UserError
from .image_config import commit_in

RELEASE_RE = re.compile(r"^\d{2}\.\d{2}$")
NGC_IMAGE_RE = re.compile(r"^nvcr\.io/nvidia/pytorch:(\d{2}\.\d{2})-py3$")
IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?$")
UPSTREAM = "https://github.com/pytorch/pytorch.git"


def ngc_image(release: str) -> str:
    return f"nvcr.io/nvidia/pytorch:{release}-py3"


@dataclass(frozen=True)
class Release:
    name: str
    image: str
    torch_version: str = ""
    torch_commit: str = ""
    torch_verified: str = "U"
    cuda: str = ""
    cuda_verified: str = "U"
    transformer_engine: str = ""
    te_verified: str = "U"
    te_commit: str = ""            # TransformerEngine's commit, from its version's +hash
    python: str = ""
    ubuntu: str = ""
    source: str = "catalog"        # catalog | live (read from the image) | registry (its config)
    cudnn: str = ""                # these four are read from the image's config (--refresh)
    nccl: str = ""
    cublas: str = ""
    triton: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Endpoint:
    """How the user named one end of the range."""

    label: str                     # what was typed
    kind: str                      # release | image | commit
    rev: str                       # a commit (maybe short) to resolve in the torch repo
    release: Release | None = None
    image: str | None = None


class Catalog:
    def __init__(self, releases: Iterable[Release], overlay_path: Path | None = None):
        self._by_name = {r.name: r for r in releases}
        self.overlay_path = overlay_path

    @classmethod
    def load(cls, cache_dir: Path | None, data: Path | None = None) -> "Catalog":
        data = data or (Path(os.environ["BISECT_NGC_CATALOG"])
                        if os.environ.get("BISECT_NGC_CATALOG") else None)
        text = data.read_text() if data else \
            resources.files("bisect_ngc").joinpath("data/ngc-pytorch-releases.tsv").read_text()
        releases = list(parse_tsv(text))
        overlay = cache_dir / "releases-overlay.json" if cache_dir else None
        cat = cls(releases, overlay)
        if overlay and overlay.exists():
            for entry in json.loads(overlay.read_text()):
                cat._by_name[entry["name"]] = Release(**entry)
        return cat

    def all(self) -> list[Release]:
        return sorted(self._by_name.values(), key=lambda r: r.name)

    def names(self) -> list[str]:
        return [r.name for r in self.all()]

    def get(self, name: str) -> Release:
        if name not in self._by_name:
            raise UserError(f"unknown release '{name}'; known: {', '.join(self.names())}",
                            hint="for another image run `bisect-ngc resolve --image IMAGE`, or "
                                 "pass a commit")
        return self._by_name[name]

    def by_image(self, image: str) -> Release | None:
        for rel in self._by_name.values():
            if rel.image == image:
                return rel
        return None

    def naming(self, sha: str) -> list[Release]:
        """The releases whose PyTorch commit is `sha` (either may be a prefix of 7+ digits)."""
        sha = sha.lower()
        if not re.fullmatch(r"[0-9a-f]{7,40}", sha):
            return []
        return [r for r in self.all() if len(r.torch_commit) >= 7 and
                (r.torch_commit.startswith(sha) or sha.startswith(r.torch_commit))]

    def same_commit(self, rel: Release) -> list[str]:
        """Other releases that ship the same PyTorch commit."""
        if not rel.torch_commit:
            return []
        return [r.name for r in self.all() if r.name != rel.name and r.torch_commit
                and (r.torch_commit.startswith(rel.torch_commit)
                     or rel.torch_commit.startswith(r.torch_commit))]

    def remember(self, rel: Release) -> None:
        """Put facts read live from an image into the overlay."""
        if self.overlay_path is None:
            return
        self._by_name[rel.name] = rel
        entries = []
        if self.overlay_path.exists():
            entries = [e for e in json.loads(self.overlay_path.read_text())
                       if e["name"] != rel.name]
        entries.append(rel.as_dict())
        self.overlay_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.overlay_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entries, indent=1))
        tmp.replace(self.overlay_path)

    def endpoint(self, spec: str) -> Endpoint:
        """A release name, an image reference, or a raw commit."""
        if RELEASE_RE.match(spec):
            rel = self.get(spec)
            return Endpoint(spec, "release", _commit_of(rel), rel, rel.image)
        if ":" in spec or "/" in spec:
            if not IMAGE_RE.match(spec):
                raise UserError(f"'{spec}' is neither a release, an image nor a commit",
                                hint="use a release like 24.09, an image like "
                                     "nvcr.io/nvidia/pytorch:24.09-py3, or a commit sha")
            known = self.by_image(spec)
            if known is None:
                raise UserError(f"image '{spec}' is not in the catalog",
                                hint=f"read its facts with `bisect-ngc resolve --image {spec}`"
                                     " on a host with Docker, then run this again")
            return Endpoint(spec, "image", _commit_of(known), known, spec)
        return Endpoint(spec, "commit", spec)


def _commit_of(rel: Release) -> str:
    if not rel.torch_commit:
        raise UserError(f"the PyTorch commit of release {rel.name} is not known",
                        hint=f"read it from the image: bisect-ngc resolve --image {rel.image}")
    return rel.torch_commit


def parse_tsv(text: str) -> Iterable[Release]:
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    for row in csv.DictReader(io.StringIO("\n".join(lines)), delimiter="\t"):
        yield Release(
            name=row["release"], image=ngc_image(row["release"]),
            torch_version=row["torch_version"], torch_commit=row["torch_commit"],
            torch_verified=row["torch_verified"] or "U", cuda=row["cuda"],
            cuda_verified=row["cuda_verified"] or "U",
            transformer_engine=row["transformer_engine"],
            te_verified=row["te_verified"] or "U", te_commit=row.get("te_commit") or "",
            python=row["python"], ubuntu=row["ubuntu"])


# Runs inside an image to read its facts; prints one JSON line.
PROBE_SCRIPT = r"""
import json, platform
out = {"python": platform.python_version()}
try:
    import torch
    out.update(torch_version=torch.__version__,
               torch_git_version=getattr(torch.version, "git_version", ""),
               cuda=torch.version.cuda or "")
except Exception as exc:
    out["torch_error"] = repr(exc)
try:
    import transformer_engine
    out["transformer_engine"] = getattr(transformer_engine, "__version__", "")
except Exception:
    out["transformer_engine"] = ""
print(json.dumps(out))
"""


def release_from_facts(image: str, facts: dict) -> Release:
    if "torch_error" in facts or not facts.get("torch_version"):
        raise UserError(f"could not import torch in {image}: {facts.get('torch_error', '?')}",
                        hint="pass an image that has PyTorch installed")
    from ..core.verdicts import reported_commit
    match = NGC_IMAGE_RE.match(image)
    return Release(
        name=match.group(1) if match else image, image=image,
        torch_version=facts["torch_version"], torch_commit=reported_commit(facts) or "",
        torch_verified="live", cuda=facts.get("cuda") or "", cuda_verified="live",
        transformer_engine=facts.get("transformer_engine") or "",
        te_verified="live", te_commit=commit_in(facts.get("transformer_engine") or ""),
        python=facts.get("python", ""), source="live")


def release_from_config(name: str, image: str, config: dict, known: Release | None = None
                        ) -> Release:
    """A release's facts as its image's config states them (`releases --refresh`), over what
    the catalog knew: what the config does not state stays (Python, Ubuntu, the release's
    own image), and so does a full commit whose prefix the config names."""
    from .image_config import facts
    found = facts(config)
    stated: dict[str, str] = {}
    torch, te = found.get("torch"), found.get("transformer_engine")
    base = known or Release(name=name, image=image)
    vague = torch and not torch.commit and base.torch_version.startswith(torch.version)
    if torch and not vague:      # a version without its commit adds nothing to the catalog's
        keep = base.torch_commit and torch.commit and base.torch_commit.startswith(torch.commit)
        stated.update(torch_version=torch.version, torch_verified="registry",
                      torch_commit=base.torch_commit if keep else torch.commit)
    if te:
        stated.update(transformer_engine=te.version, te_verified="registry",
                      te_commit=te.commit or (base.te_commit if te.version ==
                                              base.transformer_engine else ""))
    if "cuda" in found:
        stated.update(cuda=found["cuda"].version, cuda_verified="registry")
    stated.update({k: found[k].version for k in ("cudnn", "nccl", "cublas", "triton")
                   if k in found})
    return replace(base, source="registry", **stated)


def containing(history, sha: str, catalog: Catalog) -> list[dict[str, str]]:
    """For each catalog release: does its PyTorch commit contain sha? (yes/no/unknown)"""
    rows = []
    releases = catalog.all()
    present = history.present([rel.torch_commit for rel in releases if rel.torch_commit])
    for rel in releases:
        commit = present.get(rel.torch_commit)
        contains = "unknown" if commit is None else \
            "yes" if history.is_ancestor(sha, commit) else "no"
        rows.append({"release": rel.name, "image": rel.image, "commit": commit or "",
                     "contains": contains})
    return rows
