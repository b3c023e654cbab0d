"""The families that need thousands of sessions, or a container engine this machine lacks,
run in-process: the real engine and store with a scripted backend (intermittent failures,
a difference outside the searched component), the metric comparator's own loop on
simulated numbers (tests/lib/metric_sim.py), and the pure attribution search on scripted
swaps. Each returns one Outcome per session."""
from __future__ import annotations

import math
import random
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from bisect_ngc.attribution.search import Attribution, Side, Swap, next_swaps
from bisect_ngc.core.belief import Prior
from bisect_ngc.core.belief_judge import BeliefJudge
from bisect_ngc.core.engine import Bisection
from bisect_ngc.core.inputs import Range, Settings, Tier
from bisect_ngc.core.probes import Source
from bisect_ngc.core.recipes import Recipe
from bisect_ngc.core.search import Verdict
from bisect_ngc.core.store import Store
from bisect_ngc.core.verdicts import ProbeOutcome
from bisect_ngc.images.image_evidence import ImageEvidence
from bisect_ngc.metric.comparator import Rule
from bisect_ngc.vcs.history import History
from tests.lib.fakes import ScriptedBackend
from tests.lib.metric_sim import bimodal, bisect_once, lognormal, pareto, sticky
from tests.lib.repos import make_repo

from .outcomes import Outcome, grade

if TYPE_CHECKING:
    from .families import Size

ENGINE_N = 32


class _Runs(ScriptedBackend):
    """A scripted backend that draws each run's verdict: `decide(index, tier)`."""

    def __init__(self, decide):
        super().__init__(lambda i: ProbeOutcome(Verdict.SKIP))
        self.draw = decide
        self.runs = 0

    def run_round(self, requests, on_phase):
        for req in requests:
            self.probed.append(req.index)
            self.runs += 1
            v = self.draw(req.index, req.tier.value)
            yield req, ProbeOutcome(v, runs=[v])


def _indices(count: int, only: int | None) -> range:
    """Every session of a cell, or session `only` alone (--case)."""
    return range(count) if only is None else range(only, only + 1)


def _span(root: Path, n: int) -> Range:
    shas = make_repo(root / "r", n, n // 2)
    history = History.open(str(root / "r"), root / "cache")
    return Range(history, shas[0], shas[-1], shas, history.identity(shas[-1]), {"old": "a"})


def intermittent(size: "Size", seed: int, only: int | None = None,
                 prior: Prior | None = None, confidence: float | None = None
                 ) -> list[Outcome]:
    """The real engine as a bisection of any repository runs it (the belief, default
    settings), a test that shows the new side's failure with probability q and fails on
    the old side with probability eps; 32 commits."""
    from .families import FLAKES
    outs = []
    with tempfile.TemporaryDirectory(prefix="accuracy-engine-") as tmp:
        span, store = _span(Path(tmp), ENGINE_N), Store(Path(tmp) / "st")
        for q, eps in FLAKES:
            for k in _indices(size.flaky_engine, only):
                rng = random.Random(f"{seed}:{q}:{eps}:{k}")
                t = rng.randint(4, ENGINE_N - 4)
                backend = _Runs(lambda i, tier: Verdict.FAIL if rng.random() <
                                (q if i >= t else eps) else Verdict.PASS)
                settings = Settings() if confidence is None else Settings(confidence=confidence)
                res = Bisection(store, span, Recipe(build=None, test=f"flaky {seed} {q} {eps} {k}"),
                                backend, settings,
                                judge=BeliefJudge(span.candidates, settings, prior)).run()
                outs.append(Outcome("intermittent", f"q={q:g} eps={eps:g}", k,
                                    "bisect-ngc (in-process)", res.status, res.first_new,
                                    grade(res.status, res.first_new, res.candidates,
                                          planted=span.candidates[t], nameable=True),
                                    backend.runs, len(set(backend.probed)),
                                    confidence=res.confidence))
    return outs


def calibrated_reruns(q: float, eps: float, n: int, delta: float = 0.01) -> int:
    """The runs of a bisection that reruns each probe k times and calls it new when at
    least m of them fail, with k the fewest for which every decision's error keeps the
    whole answer's under delta (the baseline the belief of issue 50 must beat)."""
    decisions = math.ceil(math.log2(n)) + 2
    alpha = delta / decisions
    for k in range(1, 200):
        for m in range(1, k + 1):
            miss = sum(math.comb(k, j) * q ** j * (1 - q) ** (k - j) for j in range(m))
            false = sum(math.comb(k, j) * eps ** j * (1 - eps) ** (k - j)
                        for j in range(m, k + 1))
            if miss <= alpha and false <= alpha:
                return k * decisions
    return 200 * decisions


METRIC_ROWS = [  # (cell, changes as fractions of n, noise, keywords)
    ("5% change, 2% noise (2.5 widths)", [(0.4, 0.05)], lognormal(0.02), {}),
    ("1% change, 2% noise (0.5 widths)", [(0.4, 0.01)], lognormal(0.02), {}),
    ("2.25% change, 0.05% noise (45 widths)", [(0.4, 0.0225)], lognormal(0.0005), {}),
    ("5%, Pareto tails", [(0.4, 0.05)], pareto(0.02), {}),
    ("5%, two clock states 10% apart", [(0.4, 0.05)], bimodal(0.02), {}),
    ("5%, sticky clock states", [(0.4, 0.05)], sticky(0.02), {}),
    ("5%, drift 0.2% a run", [(0.4, 0.05)], lognormal(0.02), {"drift": 0.002}),
    ("two +5% changes", [(0.3, 0.05), (0.7, 0.05)], lognormal(0.02), {}),
    ("+5% and its reversal", [(0.3, 0.05), (0.7, 1 / 1.05 - 1)], lognormal(0.02), {}),
    ("1% change below --min-change 2%, 0.2% noise", [(0.4, 0.01)], lognormal(0.002), {}),
    ("no change, 2% noise", [], lognormal(0.02), {}),
    ("per-commit offsets 0.5%, 3% change, 1% noise", [(0.4, 0.03)], lognormal(0.01),
     {"offsets": 0.005}),
    ("per-commit offsets 1%, 3% change, 1% noise", [(0.4, 0.03)], lognormal(0.01),
     {"offsets": 0.01}),
    ("per-commit offsets 1.5%, 5% change, 1% noise", [(0.4, 0.05)], lognormal(0.01),
     {"offsets": 0.015}),
    ("minority: 30% of new runs 15% slower, 1% noise", [(0.4, 0.0)], lognormal(0.01),
     {"noise_new": bimodal(0.01, 0.15, 0.3)}),
    ("spikes: 10% of runs x1.5, 5% change, 1% noise", [(0.4, 0.05)],
     bimodal(0.01, 0.5, 0.1), {}),
]


def metric(size: "Size", seed: int, only: int | None = None) -> list[Outcome]:
    """The metric comparator's own loop (as the engine runs it) on 32 commits."""
    outs = []
    for cell, changes, noise, kw in METRIC_ROWS:
        for k in _indices(size.metric_trials, only):
            rng = random.Random(f"{seed}:{cell}:{k}")
            at = {max(1, int(f * ENGINE_N)): c for f, c in changes}
            # a change of 0 with another noise from there on: a slow path in some runs
            culprits = {i for i, c in at.items() if c or "noise_new" in kw}
            trial = bisect_once(ENGINE_N, at, noise, Rule(), rng, **kw)
            net = math.prod(1 + c for c in at.values()) - 1
            if trial.status == "found":
                g = "right" if trial.first_new in culprits and set(trial.named) <= culprits \
                    else "wrong"
            else:   # no change beyond --min-change (or none at all): "no change" is right
                g = "honest" if abs(net) < Rule().min_change and "noise_new" not in kw \
                    else "miss"
            outs.append(Outcome("metric", cell, k, "bisect-ngc (in-process)", trial.status,
                                str(trial.first_new) if trial.first_new is not None else None,
                                g, trial.runs))
    return outs


def components(size: "Size", seed: int, only: int | None = None) -> list[Outcome]:
    """The attribution search on scripted swaps: which components turn A into B."""
    cells = [("one culprit of 8", 8, 1, 0.0, False), ("one culprit of 128", 128, 1, 0.0, False),
             ("two needed together, of 32", 32, 2, 0.0, False),
             ("an unswappable culprit, of 32", 32, 1, 0.0, True),
             ("flaky swaps (5%), one culprit of 32", 32, 1, 0.05, False)]
    outs = []
    for cell, n, k_culprits, flip, stuck in cells:
        for k in _indices(size.components, only):
            rng = random.Random(f"{seed}:{cell}:{k}")
            names = [f"py:pkg{j:03d}" if j % 3 else f"env:VAR_{j}" for j in range(n)]
            culprits = frozenset(rng.sample(names, k_culprits))
            seen: dict[Swap, Side] = {}
            swaps = 0
            while not isinstance(step := next_swaps(names, seen), Attribution):
                for swap in step:
                    swaps += 1
                    moved = swap.components if swap.into == "a" else frozenset(names) - swap.components
                    if stuck and swap.components & culprits:
                        seen[swap] = Side.SKIP
                        continue
                    turned = culprits <= moved
                    turned ^= rng.random() < flip
                    seen[swap] = Side.B if turned else Side.A
            among = {c for s in step.unresolved for c in s.components} | set(step.culprits)
            g = ("right" if set(step.culprits) == culprits else "wrong") \
                if step.status == "found" else \
                "honest" if step.status in ("unresolved", "unconfirmed") and culprits <= among \
                else "miss"
            outs.append(Outcome("components", cell, k, "bisect-ngc (in-process)", step.status,
                                ",".join(step.culprits) or None, g, swaps))
    return outs


def not_in_component(size: "Size", seed: int, only: int | None = None
                     ) -> list[Outcome]:
    """Release mode's rule for images among builds: the images differ, the builds of
    their commits do not (the difference is in another part of the container)."""
    outs = []
    with tempfile.TemporaryDirectory(prefix="accuracy-images-") as tmp:
        span, store = _span(Path(tmp), ENGINE_N), Store(Path(tmp) / "st")
        for k in _indices(size.not_in, only):
            rng = random.Random(f"{seed}:images:{k}")
            at = sorted({0, ENGINE_N - 1, *rng.sample(range(1, ENGINE_N - 1), 2)})
            t = rng.choice(at[1:])                      # the release whose image changed
            tiers = [Tier("image", {i: Source("image", f"img{i}", f"NGC {i}") for i in at})]
            backend = _Runs(lambda i, tier: (Verdict.FAIL if i >= t else Verdict.PASS)
                            if tier == "image" else Verdict.PASS)
            res = Bisection(store, span, Recipe(build=None, test=f"images {seed} {k}"), backend,
                            Settings(), tiers=tiers,
                            images=ImageEvidence(tiers, span.candidates, jobs=1)).run()
            g = "wrong" if res.status == "found" else \
                "honest" if res.status == "not-in-commits" else "miss"
            outs.append(Outcome("not-in-component", "images differ, builds do not", k,
                                "bisect-ngc (in-process)", res.status, res.first_new, g,
                                backend.runs, len(set(backend.probed))))
    return outs
