"""Prebuilt artifacts that can answer before any build, each mapped to a candidate.

- images: the NGC release images as they are, at the catalog commits on the range's path;
- nightlies: upstream nightly wheels from a PEP 503 simple index (or a list of URLs),
  mapped to commits by the repository's `nightly` branch ("YYYY-MM-DD nightly release
  (SHA)") or, without it, by the `version.py` inside each wheel.
"""
from __future__ import annotations

import re
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Callable

from .backends.base import Source
from .engine import Range, Tier
from .errors import UserError
from .releases import Catalog, Endpoint
from .store import digest

WHEEL_RE = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-"
                      r"(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")
DATE_RE = re.compile(r"\.dev(\d{4})(\d{2})(\d{2})")
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


def image_tier(span: Range, catalog: Catalog, old: Endpoint, new: Endpoint) -> Tier:
    """The endpoint images, and every catalog release whose commit lies on the path."""
    find, last = _index_of(span), len(span.candidates) - 1
    sources: dict[int, Source] = {}
    for i, ep in ((0, old), (last, new)):
        if ep.image:
            sources[i] = Source("image", ep.image, _image_label(ep.image, catalog))
    for rel in catalog.all():
        i = find(rel.torch_commit) if rel.torch_commit else None
        if i is not None and i not in sources:
            sources[i] = Source("image", rel.image, f"NGC {rel.name}")
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
        try:
            with urllib.request.urlopen(index, timeout=timeout) as resp:
                page = resp.read().decode(errors="replace")
        except (OSError, ValueError) as exc:
            raise UserError(f"the nightly index {index} is unreachable: {exc}",
                            hint="pass --nightly-index URL, --nightly-urls FILE, or "
                                 "--no-nightlies") from None
        for nightly in parse_index(page, index, python):
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
        dates = {}
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


def nightly_tier(span: Range, nightlies: list[Nightly], cache_dir: Path,
                 say: Callable[[str], None]) -> Tier:
    """Map each nightly to a candidate on the path; those that map nowhere are dropped."""
    find, branch = _index_of(span), branch_map(span)
    sources: dict[int, Source] = {}
    for n in nightlies:
        if n.date in branch:
            nightly_sha, main = branch[n.date]
            reports = (main, nightly_sha)
        else:
            reported = wheel_git_version(_fetch(n, cache_dir, say))
            main, reports = reported or "", (reported or "",)
        i = find(main)
        if i is None or i in sources:
            continue
        full = span.candidates[i]
        sources[i] = Source("nightly", n.url, f"nightly {n.date}",
                            reports=",".join(r if r != main else full for r in reports if r))
    return Tier("nightly", sources)


def _fetch(n: Nightly, cache_dir: Path, say: Callable[[str], None]) -> Path:
    """A wheel downloaded once into CACHE/nightlies, to read its version."""
    dest = cache_dir / "nightlies" / digest(n.url)[:16] / n.filename
    if not dest.exists():
        say(f"reading the commit of nightly {n.date} from its wheel")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".part")
        try:
            with urllib.request.urlopen(n.url, timeout=120) as resp, open(tmp, "wb") as out:
                out.write(resp.read())
        except (OSError, ValueError) as exc:
            raise UserError(f"could not download nightly {n.date} ({n.url}): {exc}",
                            hint="check the index, or pass --no-nightlies") from None
        tmp.rename(dest)
    return dest
