"""A belief over where the change is, learnt from every run (DESIGN.md section 10).

Candidates 0..n-1 in order: the old endpoint, the commits, the new endpoint. Each commit
is on the failing side ("bad": a run fails with probability q, q < 1 for an intermittent
failure) or on the passing side ("good": a run fails with probability eps, an unrelated
failure). The hypotheses:

- a regression at k: commits k.. are bad, the rest good (k in 1..n-1);
- a fix at k: commits ..k-1 are bad, k.. good;
- no change: every commit good, or every commit bad.

The test is deterministic (q = 1, eps = 0: it never contradicts itself) with prior
probability `Prior.deterministic`, else flaky, with q ~ Beta(`Prior.shows`) and eps ~
Beta(`Prior.unrelated`), both integrated out (Beta-Binomial), so they are learnt from the
runs under each hypothesis. The posterior of a hypothesis is its prior times the
likelihood of every run, summed over the two kinds of test: one contradiction (a commit
that passed and failed, or runs out of order) and only the flaky kind is left; a test that
never contradicted itself keeps its belief close to plain bisection's.

Pure: runs in, probabilities and the next runs out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Collection, Sequence


DEFAULT_CONFIDENCE = 0.999     # docs/decisions.md: why not 0.99


@dataclass(frozen=True)
class Prior:
    """The stated priors (docs/decisions.md says why these)."""

    deterministic: float = 0.9           # P(the test never contradicts itself)
    shows: tuple[float, float] = (2.0, 1.0)        # Beta of q: a bad commit's run fails
    unrelated: tuple[float, float] = (1.0, 49.0)   # Beta of eps: a good commit's run fails
    no_change: float = 0.1               # P(every commit behaves alike), half each way
    differed: bool = False               # this test showed both behaviours before


@dataclass(frozen=True)
class Hypothesis:
    kind: str          # "regression" | "fix" | "all-good" | "all-bad"
    k: int = 0         # the first commit with the new behaviour (regression, fix)

    def bad(self, i: int) -> bool:
        return (self.kind == "regression" and i >= self.k) or \
            (self.kind == "fix" and i < self.k) or self.kind == "all-bad"

    @property
    def change(self) -> bool:
        return self.kind in ("regression", "fix")


@dataclass(frozen=True)
class Answer:
    """One answer and its probability: a change whose first new commit is one of `ks`
    (one, unless untestable commits hide which), or no change."""

    kind: str                  # as Hypothesis.kind
    ks: tuple[int, ...]
    p: float

    @property
    def change(self) -> bool:
        return self.kind in ("regression", "fix")


@dataclass
class Posterior:
    """P(hypothesis | runs), with what the runs say of the test."""

    n: int
    probs: dict[Hypothesis, float]
    deterministic: float                 # P(the test is deterministic | runs)
    q: float                             # the failing side shows its failure (posterior mean)
    eps: float                           # the passing side fails unrelatedly (posterior mean)
    bad: list[float] = field(default_factory=list)   # P(commit i is on the failing side)

    def best(self) -> tuple[Hypothesis, float]:
        h = max(self.probs, key=lambda x: (self.probs[x], x.kind == "regression", -x.k))
        return h, self.probs[h]

    def first_new(self) -> dict[int, float]:
        """P(the first commit with the new behaviour is k), over both directions."""
        out: dict[int, float] = {}
        for h, p in self.probs.items():
            if h.change:
                out[h.k] = out.get(h.k, 0.0) + p
        return out

    def answers(self, untestable: Collection[int] = ()) -> list[Answer]:
        """The answers, most probable first: hypotheses that differ only on untestable
        commits are one answer (regressions at k and k+1 differ only in commit k)."""
        out: list[Answer] = []
        for kind in ("regression", "fix"):
            group: list[int] = []
            for k in range(1, self.n):
                if group and k - 1 not in untestable:
                    out.append(self._answer(kind, group))
                    group = []
                group.append(k)
            out.append(self._answer(kind, group))
        out += [Answer(h.kind, (), p) for h, p in self.probs.items() if not h.change]
        return sorted(out, key=lambda a: (-a.p, a.kind != "regression", a.ks))

    def _answer(self, kind: str, ks: list[int]) -> Answer:
        return Answer(kind, tuple(ks), sum(self.probs[Hypothesis(kind, k)] for k in ks))

    def information(self, i: int) -> float:
        """Bits one run of commit i is expected to tell about which side it is on."""
        p = min(1.0, max(0.0, self.bad[i]))
        fails = p * self.q + (1 - p) * self.eps
        return max(0.0, _h(fails) - p * _h(self.q) - (1 - p) * _h(self.eps))


def _h(p: float) -> float:
    if p <= 0.0 or p >= 1.0:
        return 0.0
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def _log(p: float) -> float:
    return math.log(p) if p > 0 else -math.inf


def _lbeta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


class Belief:
    """Every run of every candidate, as (fails, passes) counts."""

    def __init__(self, n: int, prior: Prior | None = None):
        if n < 2:
            raise ValueError("a belief needs both endpoints")
        self.n = n
        self.prior = prior or Prior()
        self.fails = [0] * n
        self.passes = [0] * n

    def add(self, i: int, failed: bool, times: int = 1) -> None:
        if failed:
            self.fails[i] += times
        else:
            self.passes[i] += times

    def runs(self) -> int:
        return sum(self.fails) + sum(self.passes)

    def hypotheses(self) -> list[tuple[Hypothesis, float]]:
        """Every hypothesis with its prior probability."""
        n, pr = self.n, self.prior
        change = (1 - pr.no_change) / (2 * (n - 1))
        out = [(Hypothesis(kind, k), change) for kind in ("regression", "fix")
               for k in range(1, n)]
        return out + [(Hypothesis("all-good"), pr.no_change / 2),
                      (Hypothesis("all-bad"), pr.no_change / 2)]

    def posterior(self) -> Posterior:
        pr, n = self.prior, self.n
        pf = [0]                            # prefix sums: fails and passes before i
        pp = [0]
        for i in range(n):
            pf.append(pf[-1] + self.fails[i])
            pp.append(pp[-1] + self.passes[i])
        total_f, total_p = pf[-1], pp[-1]
        a_q, b_q = pr.shows
        a_e, b_e = pr.unrelated
        base_q, base_e = _lbeta(a_q, b_q), _lbeta(a_e, b_e)
        logs: list[tuple[Hypothesis, float, float, tuple[int, int, int, int]]] = []
        for h, prior in self.hypotheses():
            if h.kind == "regression":      # bad: k..n-1
                fb, pb = total_f - pf[h.k], total_p - pp[h.k]
            elif h.kind == "fix":           # bad: 0..k-1
                fb, pb = pf[h.k], pp[h.k]
            elif h.kind == "all-bad":
                fb, pb = total_f, total_p
            else:
                fb, pb = 0, 0
            fg, pg = total_f - fb, total_p - pb
            det = _log(pr.deterministic) if pb == 0 and fg == 0 else -math.inf
            flaky = _log(1 - pr.deterministic) + (_lbeta(a_q + fb, b_q + pb) - base_q) + \
                (_lbeta(a_e + fg, b_e + pg) - base_e)
            logs.append((h, math.log(prior) + det, math.log(prior) + flaky, (fb, pb, fg, pg)))
        top = max(max(d, f) for _, d, f, _ in logs)
        weights = [(h, math.exp(d - top), math.exp(f - top), c) for h, d, f, c in logs]
        z = sum(d + f for _, d, f, _ in weights)
        probs = {h: (d + f) / z for h, d, f, _ in weights}
        deterministic = sum(d for _, d, _, _ in weights) / z
        flaky_z = sum(f for _, _, f, _ in weights) or 1.0
        q = sum(f * (a_q + c[0]) / (a_q + b_q + c[0] + c[1]) for _, _, f, c in weights) / flaky_z
        eps = sum(f * (a_e + c[2]) / (a_e + b_e + c[2] + c[3]) for _, _, f, c in weights) / flaky_z
        # a deterministic test shows its side every run: blend by P(deterministic)
        q_mix = deterministic + (1 - deterministic) * q
        eps_mix = (1 - deterministic) * eps
        post = Posterior(n, probs, deterministic, q_mix, eps_mix)
        post.bad = _bad(n, probs)
        return post


def _bad(n: int, probs: dict[Hypothesis, float]) -> list[float]:
    """P(commit i is on the failing side), from the hypotheses' probabilities."""
    reg = [0.0] * (n + 1)
    fix = [0.0] * (n + 1)
    for h, p in probs.items():
        if h.kind == "regression":
            reg[h.k] += p
        elif h.kind == "fix":
            fix[h.k] += p
    all_bad = sum(p for h, p in probs.items() if h.kind == "all-bad")
    out, below = [], 0.0           # regression at k <= i: i bad; fix at k > i: i bad
    above = sum(fix)
    for i in range(n):
        below += reg[i]
        above -= fix[i]
        out.append(below + above + all_bad)
    return out


def pick(post: Posterior, count: int, testable: Sequence[float], cost: Sequence[float]
         ) -> list[int]:
    """The next `count` commits to run: the most information a second. `testable[i]` is
    the chance a try of commit i gives a run (0 for one known untestable; low beside a
    stretch of them); a run of a built commit costs its test, a new one its build too.
    Each commit after the first lies at least 1/(count+1) away, in P(bad), from those
    already chosen, while such a commit still tells something."""
    scored = sorted(((testable[i] * post.information(i) / max(cost[i], 1e-9), i)
                     for i in range(post.n) if testable[i] > 0
                     and post.information(i) > 1e-9), reverse=True)
    chosen: list[int] = []
    gap = 1.0 / (count + 1)
    for _, i in scored:
        if len(chosen) == count:
            break
        if all(abs(post.bad[i] - post.bad[j]) >= gap for j in chosen):
            chosen.append(i)
    for _, i in scored:                 # a concentrated belief: fill up near the boundary
        if len(chosen) == count:
            break
        if i not in chosen:
            chosen.append(i)
    return chosen

