"""A change in some runs only. A slow path taken now and then moves one endpoint's worst
runs and not its centre, which the trimmed means the comparator reads cannot see: the
endpoints then end "could not be told apart". This says so instead, when enough of one
endpoint's runs lie beyond every run of the other. Pure."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

# The two ways a change in some runs shows: the new endpoint's worst runs worse than any
# of the old one's (a slow path came), or the old one's worse than any new (it went).
WAYS = 2


@dataclass(frozen=True)
class Tail:
    side: str            # "new" or "old": the endpoint whose worst runs moved
    runs: int            # how many of its runs lie beyond every run of the other
    of: int
    change: float        # relative: their median over the other endpoint's median
    p: float             # how often chance puts that many there (both ways counted)

    def describe(self, metric: str, lower_is_better: bool) -> str:
        other = "old" if self.side == "new" else "new"
        worse = "higher" if lower_is_better else "lower"
        return (f"{self.runs} of the {self.side} endpoint's {self.of} runs are worse "
                f"({worse}) than "
                f"every run of the {other} ({self.change:+.1%} at their median; p = "
                f"{self.p:.2g} that chance did it): a change in some runs only, such as a "
                f"slow path taken now and then, which a bisection by the typical run of "
                f"{metric} cannot place")


def beyond_all(side: Sequence[float], other: Sequence[float]) -> float:
    """P(as many of `side`'s runs above every run of `other` as there are) when the two
    samples' runs are drawn alike (every ordering as likely): exact, whatever the noise."""
    t = sum(v > max(other) for v in side)
    n, m = len(side), len(other)
    return math.prod((n - i) / (n + m - i) for i in range(t))


def worst_runs(old: Sequence[float], new: Sequence[float], p: float,
               lower_is_better: bool = True) -> Tail | None:
    """The endpoint whose worst runs lie beyond every run of the other, more of them than
    chance puts there at p over both ways, and fewer than half of its runs (where most
    lie beyond, its centre moved: no change in some runs only); None if neither's do."""
    if min(len(old), len(new)) < 2:
        return None
    sign = 1.0 if lower_is_better else -1.0
    o, n = [sign * v for v in old], [sign * v for v in new]
    found = None
    for side, mine, theirs, raw, base in (("new", n, o, new, old), ("old", o, n, old, new)):
        chance = min(1.0, WAYS * beyond_all(mine, theirs))
        some = 2 * sum(v > max(theirs) for v in mine) < len(mine)
        if some and chance <= p and (found is None or chance < found.p):
            far = [r for r, v in zip(raw, mine) if v > max(theirs)]
            change = statistics.median(far) / statistics.median(base) - 1 \
                if statistics.median(base) else 0.0
            found = Tail(side, len(far), len(mine), change, chance)
    return found
