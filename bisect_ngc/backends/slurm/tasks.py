"""A Slurm round's tasks, made by the controller before it submits them: a worktree per
commit, where its torch comes from (the image, a download, or a build into the shared
store), and its --with companions (companions.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ...core.artifacts import ArtifactStore
from ...companions.builds import torch_identity
from ...companions.sources import CompanionSources
from ...vcs.mirrors import CheckoutError
from ...core.search import Verdict
from ...core.probes import ProbeFailed, ProbeRequest, TestPlan
from ..base import ProbeOutcome, fetch_prebuilt
from .companions import BUILD_ENV, builds, env_names, prepare, test_command


class RoundTasks:
    """The SlurmBackend's part that makes a round's tasks: each one's worktree, torch
    artifact and --with companions, and what the round's scripts are given for them."""

    s: Any
    recipe: Any
    artifacts: ArtifactStore
    images: Any
    sources: CompanionSources
    worktrees: Any
    say: Any

    def prepare_tasks(self, requests: Sequence[ProbeRequest], plan: TestPlan
                      ) -> tuple[list[dict[str, Any]], dict[str, ProbeOutcome]]:
        """Check out worktrees for a round of one plan; a checkout failure is an immediate
        skip."""
        tasks: list[dict[str, Any]] = []
        early: dict[str, ProbeOutcome] = {}
        for req in requests:
            try:
                # One worktree per commit: jobs of an interrupted round may still use theirs.
                wt = self.worktrees.checkout(req.commit[:12], req.commit, clean=True,
                                             keep=tuple(self.recipe.keep),
                                             submodules=self.recipe.submodules)
            except CheckoutError as exc:
                early[req.key] = ProbeOutcome(Verdict.SKIP, str(exc), cacheable=False)
                continue
            if plan.artifacts == "none":
                final = staging = self.artifacts.as_is().path
            elif plan.artifacts == "ready":   # the controller downloads it once
                try:
                    final = staging = fetch_prebuilt(self.artifacts, req, self.say)
                except ProbeFailed as exc:
                    early[req.key] = ProbeOutcome(Verdict.SKIP, str(exc), cacheable=False)
                    continue
            else:
                key = ArtifactStore.key(req.commit, self.recipe.image or "",
                                        self.recipe.build_key())
                final, staging = self.artifacts.path(key), self.artifacts.root / ".staging" / key
            companions = self.companion_tasks(plan, req, Path(final))
            if isinstance(companions, str):
                early[req.key] = ProbeOutcome(Verdict.SKIP, companions, cacheable=False)
                continue
            tasks.append({"commit": req.commit, "key": req.key, "worktree": str(wt),
                          "companions": companions,
                          "index": len(tasks),
                          "final": str(final), "staging": str(staging),
                          "expect": req.expected or ""})
        return tasks, early

    def companion_tasks(self, plan: Any, req: Any, final: Path) -> list[dict[str, str]] | str:
        """The task's companions (see prepare), or why it is a skip."""
        companions = self.recipe.companions
        if not companions:
            return []
        _, sqsh, found = self.images.locate(plan.image)
        image_digest = found or sqsh.name
        torch_id = torch_identity(plan.artifacts, final, req.source.ref if req.source else "",
                                  image_digest)
        return prepare(companions, self.artifacts, self.sources, self.s.shared_dir,
                       plan.image, image_digest, torch_id)

    def companion_vars(self, test: str) -> dict[str, Any]:
        """What the round's templates need for the companions, and the test to run."""
        companions = self.recipe.companions
        return {"companions": builds(companions),
                "companion_env": [(name, "") for name in BUILD_ENV],
                "companion_test_env": [(name, "") for name in env_names(companions)],
                "test": test_command(companions, test) if companions else test}
