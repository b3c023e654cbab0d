"""A pass/fail session on the belief alone (bisect_ngc/core/belief.py), with the rule of
core/belief_judge.py: the endpoints; both alike from a test that never differed ends it;
else the belief's picks one at a time until its best answer reaches the confidence with
its premises seen. Thousands of sessions a minute: the belief's tests and
benchmarks/belief_priors.py use it; the engine's own runs are in tests/core."""
from __future__ import annotations

import random
from dataclasses import dataclass

from bisect_ngc.core.belief import DEFAULT_CONFIDENCE, Answer, Belief, Prior, pick


@dataclass(frozen=True)
class Session:
    answer: Answer | None      # None: the budget ran out
    runs: int

    def right(self, t: int) -> bool:
        return self.answer is not None and self.answer.kind == "regression" and \
            self.answer.ks == (t,)

    def wrong(self, t: int) -> bool:
        """A named commit that is not the change (no change, where there is one, is a
        miss: it names nothing)."""
        return self.answer is not None and self.answer.change and not self.right(t)


def session(n: int, t: int, q: float, eps: float, rng: random.Random,
            confidence: float = DEFAULT_CONFIDENCE, prior: Prior | None = None,
            budget: int = 600) -> Session:
    """A regression at t (0 < t < n): a run of commit i >= t fails with probability q,
    one of i < t with probability eps."""
    b = Belief(n, prior)
    fresh = {True: [0] * n, False: [0] * n}

    def run(i: int) -> None:
        failed = rng.random() < (q if i >= t else eps)
        b.add(i, failed)
        fresh[failed][i] += 1
    run(0)
    run(n - 1)
    while b.runs() < budget:
        post = b.posterior()
        best = post.answers()[0]
        never = (best.kind == "all-good" and not any(b.fails)) or \
            (best.kind == "all-bad" and not any(b.passes))
        if best.p >= confidence or never:
            if not best.change:
                failed = best.kind == "all-bad"
                missing = [i for i in (0, n - 1) if not fresh[failed][i]]
            else:
                new = best.kind == "regression"
                missing = [i for i, failed in ((best.ks[0] - 1, not new), (best.ks[-1], new))
                           if not fresh[failed][i]]
            if not missing:
                return Session(best, b.runs())
            run(missing[0])
            continue
        nxt = pick(post, 1, [1.0] * n, [1.0] * n)
        if not nxt:
            break
        run(nxt[0])
    return Session(None, b.runs())
