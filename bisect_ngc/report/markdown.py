"""The markdown report of a session: the answer, the evidence, and what to do next.

`report_model` builds everything the report says from the state database alone (it
opens no repository and repeats no search: the engine stored the answer, the commit
titles and where the commit ships while it ran); `write_report` renders it with jinja2
from templates/report.md.j2, with an SVG of the range narrowing next to it. This
machine's paths are replaced by placeholders, so it can be pasted into a bug thread.
"""
from __future__ import annotations

import html
import os
import re
import shlex
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import jinja2

from ..errors import UserError
from ..core.belief_judge import belief_words
from ..core.environments import Environment
from .metric_plot import metric_svg
from ..core.search import Verdict, ceil_log, open_interval
from ..core.records import ProbeRecord, tally, verification_cost
from ..core.store import Store

GITHUB_RE = re.compile(r"^(?:https://github\.com/|git@github\.com:)([\w.-]+/[\w.-]+?)(?:\.git)?/?$")
SYSTEM_DIRS = {"bin", "sbin", "usr", "etc", "opt", "lib", "lib64", "dev", "proc", "sys", "run",
               "var", "srv", "mnt", "media", "boot", "snap", "nix"}
# An absolute path in running text: two parts or more (not "/O2" or "</script>"), not part
# of a URL, a relative path or a path under a quoted variable ("$BISECT_ARTIFACTS"/x.whl).
ABS_PATH_RE = re.compile(r"(?<![\w:/.~$<-])(?<![\w}]\")/([\w.+@-]+)(?:/[\w.+@-]+)+")


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """The compiled report template, kept across runs (compiling it costs ~0.1 s a run)."""
    try:
        return jinja2.FileSystemBytecodeCache()   # a private directory under $TMPDIR
    except (OSError, RuntimeError):
        return None


_env = jinja2.Environment(loader=jinja2.PackageLoader("bisect_ngc", "templates"),
                          undefined=jinja2.StrictUndefined, trim_blocks=True,
                          lstrip_blocks=True, keep_trailing_newline=True, autoescape=False,
                          bytecode_cache=_bytecode_cache())
_env.filters["duration"] = lambda v: f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s" if v < 100 else f"{v:.0f} s"
_MARKDOWN = re.compile(r"([\\`*_\[\]~])")


def _text(v: Any) -> str:
    """Quoted text (a commit title, a reason) shown as it is, never rendered as markdown."""
    return html.escape(_MARKDOWN.sub(r"\\\1", str("" if v is None else v)), quote=False)


_env.filters["text"] = _text
_env.filters["cell"] = lambda v: _text(v).replace("|", "\\|").replace("\n", " ")
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
        tier = next((p.details.get("tier", "build") for p in probes if p.round == rnd), "build")
        parts.append(f'<text x="10" y="{y + 14}">round {rnd} ({tier}): {left_n} left</text>')
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


def _environment(p: ProbeRecord, built: bool) -> str:
    env = Environment.from_dict(p.details.get("environment"))
    return env.show(built) if env else \
        f"{p.details.get('tier', 'build')} (recorded before environments)"


def _wall(probes: list[ProbeRecord]) -> float:
    total = 0.0
    for rnd in {p.round for p in probes}:
        ran = [(p.started, p.ended) for p in probes
               if p.round == rnd and not p.cached and p.started and p.ended]
        if ran:
            total += max(e for _, e in ran) - min(s for s, _ in ran)
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
    """Replaces this machine's paths with placeholders: the known ones (state, cache,
    repository, home) everywhere, other absolute paths outside the system directories
    in running text."""

    def __init__(self, known: dict[str, str]):
        self.known = sorted(((os.path.realpath(k), v) for k, v in known.items() if k),
                            key=lambda kv: -len(kv[0]))

    def __call__(self, text: str) -> str:
        for path, name in self.known:
            text = text.replace(path, name)
        return ABS_PATH_RE.sub(lambda m: m.group(0) if m.group(1) in SYSTEM_DIRS
                               else "…/" + m.group(0).rsplit("/", 1)[-1], text)

    def known_only(self, text: str) -> str:
        """A script as it runs: only the known paths become their placeholders."""
        for path, name in self.known:
            text = text.replace(path, name)
        return text

    def command(self, argv: list[str]) -> str:
        """A runnable command line: a placeholder stays outside the quotes (`"$VAR"/x`)."""
        out = []
        for arg in argv:
            for path, name in self.known:
                if name.startswith("$") and (arg == path or arg.startswith(path + "/")):
                    rest = arg[len(path):]
                    out.append(f'"{name}"' + (shlex.quote(rest) if rest else ""))
                    break
            else:
                out.append(shlex.quote(arg))
        return " ".join(out)


def _commit_infos(store: Store, rec: Any, probes: list[ProbeRecord]
                  ) -> Callable[[str | None], dict[str, Any] | None]:
    """A commit's title, author, date, PR and links by sha, from the stored metadata."""
    result, slug = rec.result, github_slug(rec.params.origin)
    wanted = {rec.candidates[0], rec.candidates[-1], *(p.commit for p in probes)}
    if result:
        wanted |= {s for s in (result.first_new, result.last_old, *result.candidates) if s}
        wanted |= {lv[k] for lv in result.descents or () for k in ("merge", "found") if lv[k]}
    rows = store.commits(wanted)
    index = {sha: i for i, sha in enumerate(rec.candidates)}

    def commit(sha: str | None) -> dict[str, Any] | None:
        if not sha:
            return None
        row = rows.get(sha)
        info = {"sha": sha, "short": sha[:12], "title": row["title"] if row else "",
                "author": row["author"] if row else "", "date": row["date"] if row else "",
                "pr": row["pr"] if row else None, "url": None, "pr_url": None,
                "index": index.get(sha)}
        if slug:
            info["url"] = f"https://github.com/{slug}/commit/{sha}"
            if info["pr"]:
                info["pr_url"] = f"https://github.com/{slug}/pull/{info['pr']}"
        return info
    return commit


def _evidence(first: dict[str, Any] | None, last: dict[str, Any] | None,
              probes: list[ProbeRecord], built: bool) -> list[dict[str, Any]]:
    """The answer's pair: each commit with its probe and the environment it ran in."""
    by_idx = {p.idx: p for p in probes}
    evidence = []
    for role, info in (("first new-behaviour commit", first), ("its first parent", last)):
        p = by_idx.get(info["index"]) if info else None
        if p is not None:
            evidence.append({"role": role, "commit": info, "probe": p, "details": p.details,
                             "environment": _environment(p, built)})
    return evidence


def _costs(probes: list[ProbeRecord], n: int, skipped: int) -> dict[str, Any]:
    """What the session cost: builds done and reused, time by phase, a probe's median."""
    performed = [p for p in probes if not p.cached]
    durations = [(p.details.get("checkout_s") or 0) + (p.build_s or 0) + (p.test_s or 0)
                 for p in (performed or probes)]
    return {
        "builds_done": sum(1 for p in performed if p.build_s is not None
                           and not p.details.get("build_reused")),
        "builds_reused": sum(1 for p in probes if p.details.get("build_reused")),
        "phase_totals": {"checkout": sum(p.details.get("checkout_s") or 0 for p in performed),
                         "build": sum(p.build_s or 0 for p in performed),
                         "test": sum(p.test_s or 0 for p in performed)},
        "wall": _wall(probes),
        "per_probe": statistics.median(durations) if durations else 0.0,
        "serial_steps": ceil_log(max(n - 1, 1), 2) + skipped,
    }


def report_model(store: Store, sid: str, out: Path) -> dict[str, Any]:
    """Everything the report shows, from the state database alone."""
    rec = store.session(sid)
    if rec is None:
        raise UserError(f"session '{sid}' not found")
    probes = store.probes(rec.id)
    n = len(rec.candidates)
    params, result = rec.params, rec.result
    commit = _commit_infos(store, rec, probes)
    first = commit(result.first_new) if result else None
    last = commit(result.last_old) if result else None
    evidence = _evidence(first, last, probes, bool(params.recipe.get("build")))
    overlaid = {e["commit"]["sha"] for e in evidence if e["details"].get("tier") == "overlay"}
    failing = next((e["probe"] for e in evidence if e["probe"].verdict is Verdict.FAIL), None)
    status = result.status if result else rec.status.value
    metric = result.metric if result and result.metric and result.metric["samples"] else None
    return {
        **_descent_view(_descents(result, commit)),
        "rec": rec, "status": status, "result": result, "n": n, "labels": params.labels,
        "sure": belief_words(result.belief) if result and result.belief else None,
        "origin": params.origin, "slug": github_slug(params.origin), "first": first,
        "last": last,
        "subject": params.subject,
        "verb": _verb(result, metric),
        "metric": metric,        # --metric with numbers measured: its section and plot
        "metric_rows": _metric_rows(metric, commit),
        "metric_logs": _metric_logs(probes) if metric else [],
        "candidates": [commit(s) for s in (result.candidates if result else [])],
        "endpoints": [("old", commit(rec.candidates[0])), ("new", commit(rec.candidates[-1]))],
        "recipe": params.recipe, "where": params.backend, "params": params,
        "gpu": next((p.details.get("gpu") for p in probes if p.details.get("gpu")), None),
        "ships": result.ships if result and first else [],
        "evidence": evidence, "probes": probes,
        "probe_rows": [dict(p=p, c=commit(p.commit)) for p in probes],
        "intervals": intervals(n, probes) if probes else [],
        "svg_name": out.with_name(out.stem + ("-metric.svg" if metric else "-narrowing.svg")).name,
        "reproduce": [params.probe_argv + ["--commit", c["sha"]] +
                      (["--no-overlay"] if c["sha"] in overlaid else [])
                      for c in (first, last) if c] if params.probe_argv and first else [],
        "overlaid": overlaid,
        "overlay_rows": [dict(p=p, c=commit(p.commit)) for p in probes
                         if p.details.get("tier") == "overlay"],
        "excerpt": _excerpt(store.root, failing), "failing": failing,
        "log_prefix": os.path.relpath(store.root, out.parent),
        "tally": tally(probes),
        "checks": verification_cost(store.checks(rec.id)),
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        **_costs(probes, n, len(result.skipped if result else [])),
    }


def _descents(result: Any, commit: Callable[[str | None], dict[str, Any] | None]
              ) -> list[dict[str, Any]]:
    """The merges looked into, each with its commits' titles and links."""
    return [dict(lv, merge_c=commit(lv["merge"]), found_c=commit(lv["found"]))
            for lv in (result.descents or [] if result else [])]


def _descent_view(descents: list[dict[str, Any]]) -> dict[str, Any]:
    """The descents, and the deepest one of the answer's own change that stands: `final`
    where it found a commit, `unsettled` where its branch search was ambiguous."""
    own = [d for d in descents if not d["change"] and not d["why"]]
    last = own[-1] if own else None
    return {"descents": descents, "final": last if last and last["found"] else None,
            "unsettled": last if last and not last["found"] else None}


def _verb(result, metric: dict[str, Any] | None) -> str:
    if metric and metric.get("culprit"):
        c = metric["culprit"]
        return f"made {abs(c['change']):.2%} {'worse' if c['worse'] else 'better'}"
    return "fixed" if result and result.old_outcome == Verdict.FAIL.value else "introduced"


def _metric_logs(probes: list[ProbeRecord]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each measured commit's runs, in order, with their logs: one line a commit."""
    by: dict[str, list[dict[str, Any]]] = {}
    for p in sorted(probes, key=lambda p: (p.idx, p.started or 0)):
        if p.logs:
            runs = by.setdefault(p.commit, [])
            runs.append({"run_no": len(runs) + 1, "logs": p.logs})
    return list(by.items())


def _metric_rows(metric: dict[str, Any] | None, commit) -> list[dict[str, Any]]:
    if not metric:
        return []
    return [dict(s, c=commit(sha)) for sha, s in
            sorted(metric["samples"].items(), key=lambda kv: kv[1]["index"])]


def write_report(store: Store, sid: str, out: Path | None = None) -> Written:
    """Render the session's report to `out` (default STATE/reports/SESSION.md)."""
    out = Path(out) if out else store.root / "reports" / f"{sid}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    model = report_model(store, sid, out)
    origin = model["origin"]
    argv = model["params"].probe_argv
    cache = argv[argv.index("--cache-dir") + 1] if "--cache-dir" in argv[:-1] else ""
    scrub = Scrubber({str(store.root): "$BISECT_NGC_STATE", cache: "$BISECT_NGC_CACHE",
                      origin if not model["slug"] and "://" not in origin else "": "$REPO",
                      str(Path.home()): "~"})
    # The commands must run as printed: only known paths become placeholders in them, so
    # they go in after the rest of the text is scrubbed.
    commands = {f"@@reproduce-{k}@@": scrub.command(argv)
                for k, argv in enumerate(model["reproduce"])}
    model["reproduce"] = list(commands)
    for part in ("test", "build"):      # the recipe's scripts, as runnable as the commands
        if model["recipe"].get(part):
            commands[f"@@recipe-{part}@@"] = scrub.known_only(model["recipe"][part].strip())
            model["recipe"][part] = f"@@recipe-{part}@@"
    text = scrub(_env.get_template("report.md.j2").render(**model))
    for token, command in commands.items():
        text = text.replace(token, command)
    svg = out.with_name(model["svg_name"])
    labels = model["labels"]
    title = f"{labels.get('old', '?')} → {labels.get('new', '?')}: {model['n'] - 1} commits"
    if model["metric"]:
        svg.write_text(metric_svg(model["n"], model["metric"], scrub(title)))
    else:
        svg.write_text(narrowing_svg(model["n"], model["probes"], scrub(title)))
    out.write_text(text)
    return Written(out, svg)
