"""The report's picture of a `--metric` bisection: each measured commit's median and
quartiles against its position, over the bands of the two endpoints."""
from __future__ import annotations

from html import escape
from typing import Any


def metric_svg(n: int, metric: dict[str, Any], title: str) -> str:
    rows = sorted(metric["samples"].values(), key=lambda s: s["index"])
    width, height, left, right, top, bottom = 760, 360, 80, 20, 40, 60
    lows = [r["q1"] for r in rows] + [r["min"] for r in rows]
    highs = [r["q3"] for r in rows] + [r["max"] for r in rows]
    lo, hi = min(lows), max(highs)
    pad = (hi - lo) * 0.05 or abs(hi) * 0.01 or 1.0
    lo, hi = lo - pad, hi + pad
    x = (lambda i: left + (width - left - right) * (i / max(n - 1, 1)))
    y = (lambda v: top + (height - top - bottom) * (1 - (v - lo) / (hi - lo)))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
             f'<text x="10" y="20" font-size="14" font-weight="bold">'
             f'{escape(title, quote=False)}</text>']
    ends = {0: "#2b8a3e", n - 1: "#c92a2a"}
    for r in rows:
        if r["index"] in ends:        # the endpoint's quartile band across the whole range
            parts.append(f'<rect x="{left}" y="{y(r["q3"]):.1f}" width="{width - left - right}" '
                         f'height="{max(y(r["q1"]) - y(r["q3"]), 1):.1f}" '
                         f'fill="{ends[r["index"]]}" fill-opacity="0.12"/>')
    for r in rows:
        cx = x(r["index"])
        parts.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(r["min"]):.1f}" '
                     f'y2="{y(r["max"]):.1f}" stroke="#adb5bd"/>')
        parts.append(f'<rect x="{cx - 3:.1f}" y="{y(r["q3"]):.1f}" width="6" '
                     f'height="{max(y(r["q1"]) - y(r["q3"]), 1):.1f}" fill="#4dabf7"/>')
        parts.append(f'<circle cx="{cx:.1f}" cy="{y(r["median"]):.1f}" r="3.5" fill="#1c1c1c">'
                     f'<title>#{r["index"]}: median {r["median"]:.6g} of {r["n"]} runs</title>'
                     f'</circle>')
    for v in (lo + pad, (lo + hi) / 2, hi - pad):
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.4g}</text>')
    base = height - bottom + 18
    parts.append(f'<text x="{left}" y="{base}">0 (old endpoint)</text>')
    parts.append(f'<text x="{width - right}" y="{base}" text-anchor="end">{n - 1} (new endpoint)'
                 f'</text>')
    parts.append(f'<text x="{left}" y="{base + 18}" fill="#495057">'
                 f'{escape(metric["name"], quote=False)} '
                 f'({metric["better"]} is better) by commit position: dot median, blue box '
                 f'quartiles, line min..max; bands: the endpoints\' quartiles (green old, red new)'
                 f'</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
