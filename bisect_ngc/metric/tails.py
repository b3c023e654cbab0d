"""A change in some runs only. A slow path taken now and then moves one endpoint's worst
runs and not its centre, which the trimmed means the comparator reads cannot see: the
endpoints then end "could not be told apart". This says so instead, when enough of one
endpoint's runs lie far beyond every run of the other (GAP noise widths: a whole side
shifted a little puts runs just past the other's worst, not far). Pure."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from . import sequential as seq

# The two ways a change in some runs shows: the new endpoint's worst runs worse than any
# of the old one's (a slow path came), or the old one's worse than any new (it went).
WAYS = 2
GAP = 2.0          # noise widths (the other endpoint's) beyond its worst run


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


def chance(t: int, n: int, m: int) -> float:
    """P(the t worst of n + m runs all belong to the side of n), when both sides' runs are
    drawn alike (every ordering as likely): exact, whatever the noise."""
    return math.prod((n - i) / (n + m - i) for i in range(t))


def worst_runs(old: Sequence[float], new: Sequence[float], p: float,
               lower_is_better: bool = True) -> Tail | None:
    """The endpoint whose worst runs lie GAP noise widths or more beyond every run of the
    other, more of them than chance puts beyond that run at p over both ways (a count
    of runs farther off can only be smaller: the bound holds), and fewer than half of its
    runs (where most lie beyond, its centre moved); None if neither's do."""
    if min(len(old), len(new)) < 2:
        return None
    positive = min(min(old), min(new)) > 0
    sign = 1.0 if lower_is_better else -1.0
    o, n = ([sign * v for v in seq.scaled(x, positive)] for x in (old, new))
    found = None
    for side, mine, theirs, raw, base in (("new", n, o, new, old), ("old", o, n, old, new)):
        edge = max(theirs) + GAP * seq.noise([theirs])
        far = [r for r, v in zip(raw, mine) if v > edge]
        odds = min(1.0, WAYS * chance(len(far), len(mine), len(theirs)))
        if 2 * len(far) < len(mine) and odds <= p and (found is None or odds < found.p):
            mid = statistics.median(base)
            change = (statistics.median(far) - mid) / (abs(mid) or 1.0)
            found = Tail(side, len(far), len(mine), change, odds)
    return found
