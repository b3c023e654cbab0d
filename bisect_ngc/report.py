"""The markdown report of a session: the answer, the evidence, and what to do next.

Rendered with jinja2 from bisect_ngc/templates/report.md.j2, with an SVG of the range
narrowing round by round next to it. Paths are written relative to the state directory
and absolute paths of this machine are replaced by placeholders, so the report can be
pasted into a bug thread as it is.
"""
from __future__ import annotations

import os
import re
import shlex
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from .engine import tally
from .history import History
from .releases import Catalog, containing
from .search import Result, Verdict, ceil_log, next_step, open_interval
from .store import ProbeRecord, SessionRecord, Store

GITHUB_RE = re.compile(r"^(?:https://github\.com/|git@github\.com:)([\w.-]+/[\w.-]+?)(?:\.git)?/?$")
ABS_PATH_RE = re.compile(r"(?<![\w:/.~$-])/(?:[\w.+@-]+/)*[\w.+@-]+")

_env = jinja2.Environment(loader=jinja2.PackageLoader("bisect_ngc", "templates"),
                          undefined=jinja2.StrictUndefined, trim_blocks=True,
                          lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
_env.filters["cell"] = lambda v: str("" if v is None else v).replace("|", "\\|").replace("\n", " ")
_env.filters["secs"] = lambda v: "" if v is None else f"{v:.1f}"


@dataclass
class Written:
    markdown: Path
    svg: Path


def github_slug(origin: str) -> str | None:
    m = GITHUB_RE.match(origin or "")
    return m.group(1) if m else None


def intervals(n: int, probes: list[ProbeRecord]) -> list[tuple[int, int, int]]:
    """(round, lo, hi) after each round: the last old and first new index known."""
    out, verdicts = [], {}
    for rnd in sorted({p.round for p in probes}):
        verdicts.update({p.idx: p.verdict for p in probes if p.round == rnd})
        out.append((rnd, *open_interval(n, verdicts)))
    return out


def narrowing_svg(n: int, probes: list[ProbeRecord], title: str) -> str:
    rows = intervals(n, probes)
    width, left, right, top, row_h = 760, 150, 20, 40, 26
    height = top + row_h * max(len(rows), 1) + 46
    span = width - left - right
    x = (lambda i: left + span * (i / max(n - 1, 1)))
    colour = {Verdict.PASS: "#2b8a3e", Verdict.FAIL: "#c92a2a", Verdict.SKIP: "#868e96"}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
             f'<text x="10" y="20" font-size="14" font-weight="bold">{_xml(title)}</text>']
    for k, (rnd, lo, hi) in enumerate(rows):
        y = top + k * row_h
        left_n = max(hi - lo - 1, 0)
        parts.append(f'<text x="10" y="{y + 14}">round {rnd}: {left_n} left</text>')
        parts.append(f'<rect x="{left}" y="{y + 6}" width="{span}" height="10" fill="#f1f3f5"/>')
        parts.append(f'<rect x="{x(lo):.1f}" y="{y + 4}" width="{max(x(hi) - x(lo), 2):.1f}" '
                     f'height="14" fill="#4dabf7" fill-opacity="0.55"/>')
        for p in probes:
            if p.round == rnd:
                parts.append(f'<circle cx="{x(p.idx):.1f}" cy="{y + 11}" r="4" '
                             f'fill="{colour[p.verdict]}"><title>{p.commit[:12]} '
                             f'{p.verdict.value}</title></circle>')
    y = top + row_h * len(rows) + 14
    parts.append(f'<text x="{left}" y="{y}">0 (old endpoint)</text>')
    parts.append(f'<text x="{width - right}" y="{y}" text-anchor="end">{n - 1} (new endpoint)'
                 f'</text>')
    parts.append(f'<text x="{left}" y="{y + 16}" fill="#495057">blue: the range still '
                 f'open after the round; dots: probes (green pass, red fail, grey skip)</text>')
    parts.append("</svg>")
    return "\n".join(p for p in parts if p) + "\n"


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _current_result(rec: SessionRecord, probes: list[ProbeRecord]) -> Result | None:
    n = len(rec.candidates)
    step = next_step(n, {p.idx: p.verdict for p in probes}, rec.params.get("jobs", 1))
    return step if isinstance(step, Result) else None


def _ships(rec: SessionRecord, sha: str, cache_dir: Path) -> list[dict[str, str]]:
    """Catalog releases that do and do not contain sha, when the repository knows them."""
    try:
        history = History.open(rec.params.get("origin", ""), cache_dir)
    except Exception:  # noqa: BLE001 - no repository, no section
        return []
    rows = [dict(r, commit=r["commit"][:12])
            for r in containing(history, sha, Catalog.load(cache_dir))]
    return [r for r in rows if r["contains"] != "unknown"]


def _wall(probes: list[ProbeRecord]) -> float:
    total = 0.0
    for rnd in {p.round for p in probes}:
        ran = [p for p in probes if p.round == rnd and not p.cached and p.started and p.ended]
        if ran:
            total += max(p.ended for p in ran) - min(p.started for p in ran)
    return total


def _excerpt(state: Path, probe: ProbeRecord | None, lines: int = 15) -> str:
    if probe is None:
        return ""
    names = sorted(k for k in probe.logs if k.startswith("test")) or list(probe.logs)
    for name in reversed(names):
        path = state / probe.logs[name]
        if path.exists():
            text = path.read_text(errors="replace").rstrip().splitlines()
            return "\n".join(text[-lines:])
    return ""


class Scrubber:
    """Replaces this machine's absolute paths with placeholders."""

    def __init__(self, known: dict[str, str]):
        self.known = sorted(((os.path.realpath(k), v) for k, v in known.items() if k),
                            key=lambda kv: -len(kv[0]))

    def __call__(self, text: str, *, any_path: bool = True) -> str:
        for path, name in self.known:
            text = text.replace(path, name)
        if not any_path:
            return text
        return ABS_PATH_RE.sub(lambda m: "…/" + m.group(0).rstrip("/").rsplit("/", 1)[-1], text)


def render(store: Store, sid: str | None, out: Path | None = None, *,
           cache_dir: Path) -> Written:
    rec = store.find(sid)
    probes = store.probes(rec.id)
    n = len(rec.candidates)
    state = store.root
    params = rec.params
    out = Path(out) if out else state / "reports" / f"{rec.id}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    svg_path = out.with_name(out.stem + "-narrowing.svg")
    origin = params.get("origin", "")
    slug = github_slug(origin)
    result = _current_result(rec, probes)
    summary = rec.result or {}
    wanted = [rec.candidates[i] for i in {0, n - 1, *(p.idx for p in probes)}]
    commits = store.commits(wanted)
    if len(commits) < len(wanted):   # sessions from before commits were remembered
        try:
            history = History.open(params.get("origin", ""), Path(cache_dir))
            store.remember_commits(history.info([s for s in wanted if s not in commits])
                                   .values())
            commits = store.commits(wanted)
        except Exception:  # noqa: BLE001 - titles are a nicety; the shas are the facts
            pass
    by_idx = {p.idx: p for p in probes}

    def commit(sha: str | None) -> dict[str, Any] | None:
        if not sha:
            return None
        row = commits.get(sha)
        info = {"sha": sha, "short": sha[:12], "title": row["title"] if row else "",
                "author": row["author"] if row else "", "date": row["date"] if row else "",
                "pr": row["pr"] if row else None, "url": None, "pr_url": None,
                "index": rec.candidates.index(sha) if sha in rec.candidates else None}
        if slug:
            info["url"] = f"https://github.com/{slug}/commit/{sha}"
            if info["pr"]:
                info["pr_url"] = f"https://github.com/{slug}/pull/{info['pr']}"
        return info

    first = commit(rec.candidates[result.first_new]) if result and result.first_new else None
    last = commit(rec.candidates[result.last_old]) if result and result.last_old is not None \
        else None
    backend = params.get("backend", {})
    test_cmd = backend.get("test") or ""
    is_repro = "python -m repro" in test_cmd
    evidence = []
    for role, info in (("first new-behaviour commit", first), ("its first parent", last)):
        if info is None:
            continue
        p = by_idx.get(info["index"])
        if p is not None:
            evidence.append({"role": role, "commit": info, "probe": p, "details": p.details})
    failing = next((e["probe"] for e in evidence if e["probe"].verdict is Verdict.FAIL), None)
    performed = [p for p in probes if not p.cached]
    durations = [(p.build_s or 0) + (p.test_s or 0) for p in (performed or probes)]
    per_probe = statistics.median(durations) if durations else 0.0
    serial_steps = ceil_log(max(n - 1, 1), 2) + len(result.skipped if result else [])
    reproduce = []
    argv = params.get("probe_argv")
    if argv and first:
        for info in (first, last):
            if info:
                reproduce.append(shlex.join(argv + ["--commit", info["sha"]]))
    labels = params.get("labels", {})
    status = result.status.value if result else rec.status
    if rec.status == "interrupted" and result is None:
        status = "interrupted"
    ctx = {
        "rec": rec, "status": status, "result": result, "summary": summary, "n": n,
        "labels": labels, "origin": origin, "slug": slug, "first": first, "last": last,
        "subject": "The weak-ref capture failure" if is_repro else "The failure",
        "verb": ("fixed" if result and result.old_outcome is Verdict.FAIL else "introduced"),
        "candidates": [commit(rec.candidates[i]) for i in (result.candidates if result else [])],
        "endpoints": [("old", commit(rec.candidates[0])), ("new", commit(rec.candidates[-1]))],
        "backend": backend, "params": params, "test_cmd": test_cmd, "is_repro": is_repro,
        "gpu": next((p.details.get("gpu") for p in probes if p.details.get("gpu")), None),
        "ships": _ships(rec, first["sha"], Path(cache_dir)) if first else [],
        "evidence": evidence, "probes": probes,
        "probe_rows": [dict(p=p, c=commit(p.commit)) for p in probes],
        "intervals": intervals(n, probes) if probes else [],
        "svg_name": svg_path.name,
        "builds_done": sum(1 for p in performed if p.build_s is not None
                           and not p.details.get("build_reused")),
        "builds_reused": sum(1 for p in probes if p.details.get("build_reused")),
        "wall": _wall(probes), "per_probe": per_probe, "serial_steps": serial_steps,
        "serial_time": serial_steps * per_probe,
        "reproduce": reproduce, "excerpt": _excerpt(state, failing), "failing": failing,
        "log_prefix": os.path.relpath(state, out.parent),
        "tally": tally(probes),
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    scrub = Scrubber({str(state): "$BISECT_NGC_STATE", str(cache_dir): "$BISECT_NGC_CACHE",
                      origin if not slug and "://" not in origin else "": "$REPO",
                      str(Path.home()): "~"})
    text = scrub(_env.get_template("report.md.j2").render(**ctx))
    title = f"{labels.get('old', '?')} → {labels.get('new', '?')}: {n} candidates"
    svg_path.write_text(narrowing_svg(n, probes, scrub(title)))
    out.write_text(text)
    return Written(out, svg_path)

