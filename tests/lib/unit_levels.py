"""Numbers where a commit is a unit: each interior commit's build has its own speed,
exp(N(0, sd)) fixed per commit (code layout), times 1 + change from the culprit on, times
run noise exp(N(0, noise)). Seeded by commit and run: a scripted test that prints
`value(...)` gives the same numbers in the same order every time it is bisected."""
from __future__ import annotations

import math
import random


def value(seed: int, n: int, culprit: int, change: float, sd: float, noise: float,
          i: int, k: int, slow: float = 0.0, share: float = 0.0) -> float:
    """The k-th run of commit i (0-based), in milliseconds around 100; from the culprit
    on, a run takes a path `slow` slower with probability `share`."""
    offset = random.Random(f"{seed}/offset/{i}").gauss(0, sd) if 0 < i < n - 1 else 0.0
    rng = random.Random(f"{seed}/run/{i}/{k}")
    run = rng.gauss(0, noise)
    path = 1 + slow if i >= culprit and rng.random() < share else 1.0
    return 100 * (1 + change if i >= culprit else 1.0) * math.exp(offset + run) * path


# The test the CLI runs at each commit: which commit (version.txt) and how many runs it had
# (a counter file per commit), then the number. ROOT, SEED, ... are filled in by `script`.
SCRIPT = """\
import json, pathlib, sys
sys.path.insert(0, {root!r})
from tests.lib.unit_levels import value
i = int(pathlib.Path("version.txt").read_text())
count = pathlib.Path({counts!r}) / str(i)
k = int(count.read_text()) if count.exists() else 0
count.write_text(str(k + 1))
print(json.dumps({{"ms": value({seed}, {n}, {culprit}, {change}, {sd}, {noise}, i, k, {slow},
                               {share})}}))
"""


def script(root: str, counts: str, seed: int, n: int, culprit: int, change: float,
           sd: float, noise: float, slow: float = 0.0, share: float = 0.0) -> str:
    return SCRIPT.format(root=root, counts=counts, seed=seed, n=n, culprit=culprit,
                         change=change, sd=sd, noise=noise, slow=slow, share=share)
