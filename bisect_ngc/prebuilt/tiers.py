"""Prebuilt artifacts that can answer before any build, each mapped to a candidate.

- images: the NGC release images as they are, at the catalog commits on the range's path;
- prebuilt artifacts (`--artifacts SPEC`, any repository): files in a directory, links of
  an HTML index page, or a file of URLs, mapped to commits by a rule (`--artifact-map`):
  `name` (a sha in the file name), `version-py` (git_version in the wheel's
  */version.py), `nightly-branch` (the date in the file name, looked up on the
  repository's `nightly` branch: "YYYY-MM-DD nightly release (SHA)"), or `command:CMD`
  (CMD gets the downloaded file as $1 and prints the sha);
- nightlies: the release-mode preset of the above: PyTorch's nightly index, one wheel a
  day for the image's Python, mapped by `nightly-branch` or else `version-py`.
"""
from __future__ import annotations

import re
import subprocess
import urllib.parse
import zipfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Callable

from ..core.artifacts import ArtifactStore, artifact_name, urlopen
from ..core.probes import ProbeKind, Source
from ..core.inputs import Range, Tier
from ..errors import UserError
from ..images.releases import Catalog, Endpoint

WHEEL_RE = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-"
                      r"(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")
DATE_RE = re.compile(r"\.dev(\d{4})(\d{2})(\d{2})")
SHA_IN_NAME_RE = re.compile(r"(?<![0-9a-f])[0-9a-f]{7,40}(?![0-9a-f])")
MAP_RULES = ("name", "version-py", "nightly-branch", "command:CMD")
BRANCH_RE = re.compile(r"^(\d{4}-\d{2}-\d{2}) nightly release \(([0-9a-f]{7,40})\)")
GIT_VERSION_RE = re.compile(r"""^git_version\s*=\s*['"]([0-9a-f]{7,40})['"]""", re.M)
PYTORCH_NIGHTLY = "https://download.pytorch.org/whl/nightly/{cuda}/torch/"


def _index_of(span: Range) -> Callable[[str], int | None]:
    """Candidate index of a full or abbreviated sha on the path, else None."""
    index = {sha: i for i, sha in enumerate(span.candidates)}

    def find(sha: str) -> int | None:
        if sha in index:
            return index[sha]
        hits = [i for full, i in index.items() if full.startswith(sha)] if len(sha) >= 7 else []
        return hits[0] if len(hits) == 1 else None
    return find


def image_tier(span: Range, catalog: Catalog, old: Endpoint, new: Endpoint,
               commit_of: Callable[[Any], str] = lambda rel: rel.torch_commit) -> Tier:
    """The endpoint images, and every catalog release whose commit (of what is bisected:
    torch's, or TE's with --component) lies on the path."""
    find, last = _index_of(span), len(span.candidates) - 1
    sources: dict[int, Source] = {}
    for i, ep in ((0, old), (last, new)):
        if ep.image:
            sources[i] = Source(ProbeKind.IMAGE, ep.image, _image_label(ep.image, catalog))
    for rel in catalog.all():
        at = find(commit_of(rel)) if commit_of(rel) else None
        if at is not None and at not in sources:
            sources[at] = Source(ProbeKind.IMAGE, rel.image, f"NGC {rel.name}")
    return Tier("image", sources)


def _image_label(image: str, catalog: Catalog) -> str:
    rel = catalog.by_image(image)
    return f"NGC {rel.name}" if rel else image


# --- nightlies ---------------------------------------------------------------------

@dataclass(frozen=True)
class Nightly:
    date: str          # YYYY-MM-DD
    url: str
    filename: str


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data):
        if self._href is not None and data.strip():
            self.links.append((self._href, data.strip()))
            self._href = None


def parse_index(page: str, base: str, python: str | None = None) -> list[Nightly]:
    """The dated wheels of a PEP 503 project page, one per day (the first that fits this
    Python and a Linux x86-64 machine)."""
    parser = _Links()
    try:
        parser.feed(page)
    except Exception as exc:  # noqa: BLE001 - html.parser raises assorted errors
        raise UserError(f"the nightly index at {base} is not an HTML page: {exc}",
                        hint="--nightly-index takes a PEP 503 project page URL") from None
    by_date: dict[str, Nightly] = {}
    for href, text in parser.links:
        nightly = _nightly(urllib.parse.urljoin(base, href), text, python)
        if nightly and nightly.date not in by_date:
            by_date[nightly.date] = nightly
    return [by_date[d] for d in sorted(by_date)]


def _nightly(url: str, filename: str, python: str | None) -> Nightly | None:
    m = WHEEL_RE.match(filename)
    date = DATE_RE.search(m.group("version")) if m else None
    if not (m and date):
        return None
    tags = set(m.group("py").split("."))
    plat = m.group("plat")
    if python and not tags & {"py3", f"cp{python.replace('.', '')}"}:
        return None
    if plat != "any" and not ("linux" in plat and "x86_64" in plat):
        return None
    return Nightly("-".join(date.groups()), url, filename)


def _fetch_page(url: str, timeout: float) -> str:
    try:
        with urlopen(url, timeout=timeout) as resp:
            return resp.read().decode(errors="replace")
    except (OSError, ValueError) as exc:
        raise UserError(f"the index {url} is unreachable: {exc}",
                        hint="check the URL, or leave the prebuilt tier out") from None


def list_artifacts(spec: str, timeout: float = 20) -> list[Nightly]:
    """Every artifact SPEC names: a directory's files, an index page's links, or a file's
    URLs (one a line), in that order of preference."""
    path = Path(spec).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file())
        return [Nightly("", p.resolve().as_uri(), p.name) for p in files]
    if path.is_file():
        urls = path.read_text().split()
        return [Nightly("", u, u.rsplit("/", 1)[-1].split("#")[0]) for u in urls]
    if "://" not in spec:
        raise UserError(f"--artifacts {spec!r} is neither a directory, a file nor a URL",
                        hint="a directory of artifacts, a file of URLs, or an index URL")
    parser = _Links()
    parser.feed(_fetch_page(spec, timeout))
    return [Nightly("", urllib.parse.urljoin(spec, href), text.split()[0])
            for href, text in parser.links]


def list_nightlies(index: str | None, urls_file: Path | None, python: str | None,
                   timeout: float = 20) -> list[Nightly]:
    found: dict[str, Nightly] = {}
    if urls_file:
        try:
            lines = Path(urls_file).read_text().split()
        except OSError as exc:
            raise UserError(f"cannot read --nightly-urls {urls_file}: {exc.strerror}",
                            hint="a file with one wheel URL a line") from None
        for url in lines:
            nightly = _nightly(url, url.rsplit("/", 1)[-1].split("#")[0], python)
            if nightly:
                found.setdefault(nightly.date, nightly)
    if index:
        for nightly in parse_index(_fetch_page(index, timeout), index, python):
            found.setdefault(nightly.date, nightly)
    return [found[d] for d in sorted(found)]


def branch_map(span: Range) -> dict[str, tuple[str, str]]:
    """date -> (nightly-branch commit, the main commit its subject names), from the
    repository's `nightly` branch if it has one."""
    repo = span.history.repo
    for ref in ("refs/heads/nightly", "refs/remotes/origin/nightly"):
        try:
            out = repo.git.log("--format=%H %s", ref)
        except Exception:  # noqa: BLE001 - no such branch
            continue
        dates: dict[str, tuple[str, str]] = {}
        for line in out.splitlines():
            sha, _, subject = line.partition(" ")
            m = BRANCH_RE.match(subject)
            if m:
                dates.setdefault(m.group(1), (sha, m.group(2)))
        return dates
    return {}


def wheel_git_version(path: Path) -> str | None:
    """`git_version` from the `*/version.py` of a wheel."""
    with zipfile.ZipFile(path) as whl:
        for name in whl.namelist():
            if name.count("/") == 1 and name.endswith("/version.py"):
                m = GIT_VERSION_RE.search(whl.read(name).decode(errors="replace"))
                if m:
                    return m.group(1)
    return None


def artifact_tier(span: Range, listed: list[Nightly], rule: str, store: ArtifactStore,
                  say: Callable[[str], None], tier: str = "prebuilt") -> Tier:
    """Map each listed artifact to a candidate by `rule`; those that map nowhere on the
    path are dropped. `nightly` is the preset: `nightly-branch`, else `version-py`."""
    find = _index_of(span)
    branch = branch_map(span) if rule in ("nightly", "nightly-branch") else {}
    sources: dict[int, Source] = {}
    for art in listed:
        main, reports = _map_one(art, rule, branch, find, store, say)
        i = find(main) if main else None
        if i is None or i in sources:
            continue
        full = span.candidates[i]
        label = f"nightly {art.date}" if art.date else art.filename
        sources[i] = Source(ProbeKind(tier), art.url, label,
                            reports=",".join(full if r == main else r for r in reports if r))
    return Tier(tier, sources)


def _map_one(art: Nightly, rule: str, branch: dict[str, tuple[str, str]],
             find: Callable[[str], int | None], store: ArtifactStore,
             say: Callable[[str], None]) -> tuple[str | None, tuple[str, ...]]:
    """(the candidate sha an artifact maps to, the shas it may report)."""
    if rule == "name":
        sha = next((h for h in SHA_IN_NAME_RE.findall(art.filename) if find(h) is not None),
                   None)
        return sha, (sha or "",)
    if art.date and art.date in branch:
        nightly_sha, main = branch[art.date]
        return main, (main, nightly_sha)
    if rule == "nightly-branch":
        return None, ()
    if rule in ("version-py", "nightly"):
        try:
            reported = wheel_git_version(_fetch(art, store, say))
        except zipfile.BadZipFile:
            say(f"{art.filename} is not a wheel: no version.py to read; left out")
            return None, ()
        return reported, (reported or "",)
    if rule.startswith("command:"):
        out = subprocess.run(["/bin/sh", "-c", rule[len("command:"):], "sh",
                              str(_fetch(art, store, say))],
                             capture_output=True, text=True, timeout=300)
        sha = out.stdout.split()[0] if out.returncode == 0 and out.stdout.split() else None
        return sha, (sha or "",)
    raise UserError(f"unknown --artifact-map rule {rule!r}",
                    hint=f"one of {', '.join(MAP_RULES)}")


def nightly_tier(span: Range, nightlies: list[Nightly], store: ArtifactStore,
                 say: Callable[[str], None]) -> Tier:
    return artifact_tier(span, nightlies, "nightly", store, say, tier="nightly")


def _fetch(n: Nightly, store: ArtifactStore, say: Callable[[str], None]) -> Path:
    """The artifact's file, downloaded once into the store: the probe that tests it
    later finds it there."""
    try:
        return store.fetch(n.url, say).path / artifact_name(n.url)
    except (OSError, ValueError) as exc:
        raise UserError(f"could not download {n.filename} ({n.url}): {exc}",
                        hint="check the index or the files it names") from None

