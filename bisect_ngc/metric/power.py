"""How many runs would tell a change: what an answer without a difference says to do. Pure."""
from __future__ import annotations

import math


def runs_to_tell(s: float, change: float, m: float, alpha: float, size: float,
                 cap: int = 1000) -> int | None:
    """About how many runs a side, at noise s, would tell a change of `change` (as
    measured) from none at alpha and from m with confidence `size` (clear of m, or inside
    +-m where the change is under m), four times in five: where the trimmed means'
    standard error, 1.25 s sqrt(2 / n), gets small enough. None beyond `cap`."""
    from scipy import stats
    d, za, zb = abs(change), float(stats.norm.ppf(1 - alpha / 2)), float(stats.norm.ppf(0.8))
    z90 = float(stats.norm.ppf(size))
    se = min(d / (za + zb), (d - m) / (z90 + zb)) if d > m else (m - d) / (z90 + zb)
    if se <= 0:
        return None
    n = math.ceil(2 * (1.25 * s / se) ** 2)
    return n if n <= cap else None
