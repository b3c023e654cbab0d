"""Release mode's rule for NGC images among builds (the engine calls it as its ImageRule).

An image's verdict and a build's are compared only after the image's own commit was probed
in the build environment too: the search keeps the image's verdict, and a build that
disagrees with it ends the bisection with "not in these commits". Builds follow the images'
narrowing into the older of the two releases they narrowed to. Swaps say, without a build,
whether the bisected component carries the difference, and which component does when it
does not."""
from __future__ import annotations

from typing import Any, Callable

from ..core.inputs import ImageSwaps, Overlays, Tier
from ..core.probes import Backend
from ..core.recipes import Recipe
from ..core.records import ProbeRecord
from ..core.search import Result, Round, Status, Verdict, next_in_subset, open_interval

Rebase = Callable[[str], tuple[Recipe, Backend, Overlays | None]]


class ImageEvidence:
    def __init__(self, tiers: list[Tier], candidates: list[str], jobs: int, *,
                 swaps: ImageSwaps | None = None, rebase: Rebase | None = None):
        self.tiers = [t for t in tiers if t.sources]
        self.images = [t for t in self.tiers if t.name == "image"]
        self.candidates, self.jobs = candidates, jobs
        self.swaps, self.rebase = swaps, rebase
        self.image_verdicts: dict[int, Verdict] = {}
        self.wheel_verdicts: dict[int, Verdict] = {}
        self._followed = False
        self._carries: dict[tuple[int, int], bool | None] = {}
        self._between = (0, len(candidates) - 1)   # the images last compared

    def note(self, rec: ProbeRecord, verdicts: dict[int, Verdict]) -> None:
        """A verdict for the search; where an image decided a commit, the search keeps the
        image's verdict and a build's is kept aside for before_builds."""
        i = rec.idx
        if rec.details.get("tier") == "image":
            self.image_verdicts[i] = verdicts[i] = rec.verdict
            return
        self.wheel_verdicts[i] = rec.verdict
        verdicts[i] = self.image_verdicts.get(i, rec.verdict)

    def follow(self, verdicts: dict[int, Verdict], image: str | None
               ) -> tuple[Recipe, Backend, Overlays | None] | None:
        """Once images narrow no further, builds run in the older of the two releases they
        narrowed to, not in the image --from named (months older than these commits)."""
        n = len(self.candidates)
        if self.rebase is None or self._followed or not self.images or \
                not self.image_verdicts or \
                any(next_in_subset(n, verdicts, t.sources, self.jobs) for t in self.images):
            return None
        self._followed = True
        ref = self._image_ref(open_interval(n, verdicts)[0])
        return None if ref is None or ref == image else self.rebase(ref)

    def before_builds(self, verdicts: dict[int, Verdict], recipe: Recipe
                      ) -> Round | Result | None:
        """Before builds take over from images: probe the interval's ends that only an
        image decided in the build environment; stop if it disagrees with the image."""
        n = len(self.candidates)
        old, new = verdicts.get(0), verdicts.get(n - 1)
        if not self.image_verdicts or old is None or new is None or old is new or \
                Verdict.SKIP in (old, new):
            return None
        lo, hi = open_interval(n, verdicts)
        ends = [i for i in (lo, hi) if i in self.image_verdicts]
        self._between = (lo, hi)
        for i in ends:
            built = self.wheel_verdicts.get(i)
            if built is not None and built is not self.image_verdicts[i]:
                return self._not_in_commits(i, built, lo, hi, old, new, recipe)
        need = tuple(i for i in ends if i not in self.wheel_verdicts)
        what = recipe.bisected
        if len(need) == 2 and self._carries_it(lo, hi) is False:
            return Result(Status.NOT_IN_COMMITS, last_old=lo, old_outcome=old, new_outcome=new,
                          explanation=f"{self._label(lo)} with the {what} of "
                                      f"{self._label(hi)} put in place still behaves "
                                      f"{self.image_verdicts[lo].value}: the difference is not in "
                                      f"{what} (nothing was built)")
        return Round(need) if need else None

    def components(self) -> dict[str, Any] | None:
        """Which component makes the two images last compared differ (swaps, no build)."""
        a, b = (self._image_ref(i) for i in self._between)
        return None if self.swaps is None or a is None or b is None else \
            self.swaps.attribute(a, b)

    def _image_ref(self, i: int) -> str | None:
        return next((t.sources[i].ref for t in self.images if i in t.sources), None)

    def _label(self, i: int) -> str:
        return next((t.sources[i].label for t in self.tiers if i in t.sources),
                    self.candidates[i][:12])

    def _carries_it(self, lo: int, hi: int) -> bool | None:
        """One swap, no build: the older image with the newer one's files of what is
        bisected (PyTorch, or --component's)."""
        a, b = self._image_ref(lo), self._image_ref(hi)
        if self.swaps is None or a is None or b is None:
            return None
        if (lo, hi) not in self._carries:
            self._carries[lo, hi] = self.swaps.carries(a, b)
        return self._carries[lo, hi]

    def _not_in_commits(self, i: int, built: Verdict, lo: int, hi: int, old: Verdict,
                        new: Verdict, recipe: Recipe) -> Result:
        name, what = self._label, recipe.bisected
        base = recipe.image or "this host"
        if built is Verdict.SKIP:
            return Result(Status.AMBIGUOUS, last_old=lo, candidates=tuple(range(lo + 1, hi + 1)),
                          explanation=f"{name(i)} behaves {self.image_verdicts[i].value}, but "
                                      f"{what} at its commit could not be tested in {base}, so "
                                      f"no build can be compared with it",
                          old_outcome=old, new_outcome=new)
        return Result(Status.NOT_IN_COMMITS, last_old=lo,
                      rests_on=((i, "image", self.image_verdicts[i]), (i, "build", built)),
                      explanation=f"{name(i)} behaves {self.image_verdicts[i].value}, but "
                                  f"{what} at its commit ({self.candidates[i][:12]}) built "
                                  f"in {base} behaves {built.value}: the difference is not in "
                                  f"{what}'s commits between {name(lo)} and {name(hi)}; another "
                                  f"part of the container (or NVIDIA's build of {what}) made it",
                      old_outcome=old, new_outcome=new)
