"""Probes as Slurm job arrays: one build array on CPU nodes, one test array on GPU nodes
that depends on it (afterok), per round.

Every job id is written to the state database before the controller waits on it, so a
killed controller run again re-attaches to its jobs and never submits a probe twice.
Each task writes its outcome to a JSON file in the shared directory (write, then rename).
Polling asks the scheduler about all of a session's jobs in one squeue call, backing off,
and one sacct call for the jobs that ended without an outcome file.
"""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ...core.artifacts import ArtifactStore
from ...errors import UserError
from ...vcs.worktrees import Worktrees
from ...core.recipes import REPRO_IN_CONTAINER, Recipe
from ...core.search import RepeatPolicy, Verdict
from ...core.keys import digest
from ...core.records import SlurmJob
from ...core.store import Store
from ...companions.sources import CompanionSources
from .companions import wheel_mounts
from .tasks import RoundTasks
from .containers import SlurmContainers
from .images import ImportAhead, SquashfsImages
from .results import read_result, result_path
from .queue import (ENDED_WITHOUT_RESULT, Scheduler, end_action, queue_phase,
                    task_end)
from .settings import SlurmSettings
from .scripts import TEMPLATES, round_mounts, write_controller
from ...core.probes import BackendSetup, PhaseCallback, ProbeRequest, TestPlan, test_plan
from ..base import ProbeOutcome


class SlurmBackend(RoundTasks):
    name = "slurm"
    tiers: tuple[str, ...] = ("nightly", "prebuilt", "overlay")   # test-only jobs (+ images)

    def __init__(self, worktrees: Worktrees, recipe: Recipe, *, settings: SlurmSettings,
                 store: Store, artifacts: ArtifactStore,
                 say: Callable[[str], None] | None = None, cache_dir: Path = Path(".")):
        self.worktrees = worktrees
        self.recipe = recipe
        self.build_cmd = recipe.build or "true"
        self.test_cmd = recipe.test
        self.s = settings
        self.store = store
        self.artifacts = artifacts
        self.timeout = recipe.timeout
        self.build_timeout = recipe.build_timeout
        self.env = dict(recipe.env)
        self.mounts = list(recipe.mounts) + wheel_mounts(recipe.companions) \
            if settings.runtime != "none" else []
        self.sources = CompanionSources(cache_dir)
        if settings.runtime == "none":   # no container to mount the repro into
            self.env.update({"BISECT_REPRO_PARENT": str(m.host.parent) for m in recipe.mounts
                             if m.container == f"{REPRO_IN_CONTAINER}/repro"})
        if settings.runtime != "none":
            self.tiers = (*self.tiers, "image")
        self.say = say or (lambda text: None)
        self.sched = Scheduler()
        self.images = SquashfsImages(settings.shared_dir, settings.container_import)
        self.ahead = ImportAhead(settings, self.sched, self.images, self.say)
        self.session = ""
        self.node: str | None = None      # --same-node: where the tests run
        self.cancelling = False

    @classmethod
    def create(cls, setup: BackendSetup) -> "SlurmBackend":
        cfg = dict(setup.options)
        worktrees = cfg.pop("worktrees")
        settings = SlurmSettings(image=setup.recipe.image, **cfg)
        # On the shared dir: the nodes' checkouts borrow the submodule objects from it.
        return cls(setup.worktrees(worktrees, settings.shared_dir / "submodules"),
                   setup.recipe, settings=settings,
                   store=setup.store, artifacts=ArtifactStore(setup.artifact_store), say=setup.say,
                   cache_dir=setup.cache_dir)

    # --- the interface -------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        out = {"backend": self.name, "runtime": self.s.runtime,
               "partition": self.s.partition, "gpu_partition": self.s.gpu_partition,
               "gpus_per_probe": self.s.gpus_per_probe, "shared_dir": str(self.s.shared_dir)}
        if self.s.runtime in ("enroot", "pyxis") and self.s.image:
            uri, sqsh, found = self.images.locate(self.s.image)
            out.update(image_import=uri, image_squashfs=str(sqsh), image_digest=found or None)
        return out

    def environment(self) -> str:
        return f"slurm:{self.s.runtime}:{self.s.image or '-'}"

    def prepare(self) -> None:
        self.s.check()
        if self.recipe.companions and self.s.runtime in ("none", "apptainer"):
            raise UserError(f"--with on Slurm needs enroot or pyxis, not --container-runtime "
                            f"{self.s.runtime}", hint="companions are built in the image: "
                            "pass --container-runtime pyxis (or enroot)")
        if self.s.runtime in ("enroot", "pyxis"):
            self.images.locate(self.s.image)       # a missing local image fails here
        out = self.sched.run(["sinfo", "-h", "-o", "%P"], what="sinfo")
        known = {p.rstrip("*") for p in out.split()}
        for flag, part in (("--partition", self.s.partition),
                           ("--gpu-partition", self.s.gpu_partition)):
            if part and part not in known:
                raise UserError(f"unknown Slurm partition '{part}' ({flag})",
                                hint=f"partitions here: {', '.join(sorted(known))}")

    def containers(self) -> SlurmContainers | None:
        """Containers of whole images, for swap probes between release images: test-only
        jobs through enroot or pyxis (no other runtime runs a squashfs)."""
        if self.s.runtime not in ("pyxis", "enroot"):
            return None
        return SlurmContainers(self.s, self.sched, self.images, self.say)

    def cancel(self) -> None:
        self.cancelling = True
        self.ahead.drop()
        for job in self._jobs().values():   # our own scancel: never a used attempt
            self.store.put_slurm_job(self.session, replace(job, cancelled_by_us=True))
        jobs = self._session_jobs()
        if jobs:
            try:
                self.sched.run(["scancel", *sorted(jobs)], what="scancel")
            except UserError as exc:
                self.say(str(exc))

    @property
    def job_tag(self) -> str:
        """Names this session's jobs: session ids repeat across state directories."""
        return f"{self.session}-{digest(str(self.store.root))[:6]}"

    # --- bookkeeping in the state database -------------------------------------------
    def _jobs(self) -> dict[str, SlurmJob]:
        return self.store.slurm_jobs(self.session)

    def _session_jobs(self) -> set[str]:
        return {j for job in self._jobs().values() for j in (job.build_job, job.test_job) if j}

    # --- rendering -------------------------------------------------------------------
    def round_dir(self, key: str) -> Path:
        return self.s.shared_dir / "rounds" / self.session / key

    def render(self, key: str, tasks: list[dict[str, Any]], runs: int,
               policy: RepeatPolicy, image: str | None = None,
               test: str | None = None) -> tuple[str, str]:
        """The round's build and test scripts; an image probe passes its own image and
        the as-is test."""
        rdir = self.round_dir(key)
        image = image or self.s.image or ""
        uri, sqsh, _ = self.images.locate(image) if self.s.runtime in ("enroot", "pyxis") \
            else ("", Path(), "")
        common = dict(account=self.s.account, qos=self.s.qos, time=self.s.time,
                      extra=self.s.sbatch_args, runtime=self.s.runtime, image=image,
                      test_extra=self._same_node(),
                      import_uri=uri, sqsh=str(sqsh), shared_dir=str(self.s.shared_dir),
                      round_key=key, round_dir=str(rdir), tasks=tasks,
                      env=sorted(self.env.items()), array=f"0-{len(tasks) - 1}")
        mounts = round_mounts(self.worktrees, tasks, self.s.shared_dir, self.s.runtime,
                              self.mounts)
        more = self.companion_vars(test or self.test_cmd)
        build = TEMPLATES.get_template("slurm-build.sh.j2").render(**more,
            name=f"bisect-ngc-build-{self.job_tag}", partition=self.s.partition or "",
            out=str(rdir / "slurm-build-%A_%a.out"), build=self.build_cmd,
            build_timeout=self.build_timeout and int(self.build_timeout), mounts=mounts,
            **common)
        test = TEMPLATES.get_template("slurm-test.sh.j2").render(
            name=f"bisect-ngc-test-{self.job_tag}",
            partition=self.s.gpu_partition or self.s.partition or "",
            out=str(rdir / "slurm-test-%A_%a.out"), runs=runs, **more,
            stop_on_fail=policy is RepeatPolicy.ANY, gpus=self.s.gpus_per_probe,
            timeout=self.timeout and int(self.timeout), mounts=mounts, **common)
        return build, test

    # --- one round --------------------------------------------------------------------
    def run_round(self, requests: Sequence[ProbeRequest],
                  on_phase: PhaseCallback) -> Iterator[tuple[ProbeRequest, ProbeOutcome]]:
        self.session = requests[0].session
        by_key = {r.key: r for r in requests}
        known = self._jobs()
        fresh = [r for r in requests if r.key not in known]
        if known.keys() & by_key.keys():
            self.say(f"re-attaching to {len(known.keys() & by_key.keys())} probe job(s) "
                     "submitted by an earlier run")
        try:
            self._finish_submissions(known)
            if fresh:
                for commit, outcome in self._submit(fresh).items():
                    yield by_key[commit], outcome
            for req in requests:
                on_phase(req, "queued")
            yield from self._wait(by_key, requests[0].policy, on_phase)
        except BaseException:
            self.cancel()
            raise

    def _submit(self, requests: Sequence[ProbeRequest], attempt: int = 0
                ) -> dict[str, ProbeOutcome]:
        """One array pair per plan: builds in one build+test pair, ready artifacts
        (nightlies, overlays) in one test array, each image in a test array of its own."""
        groups: dict[TestPlan, list[ProbeRequest]] = {}
        for req in requests:
            groups.setdefault(test_plan(req, self.recipe), []).append(req)
        early: dict[str, ProbeOutcome] = {}
        for plan, group in groups.items():
            early.update(self._submit_round(group, plan, attempt))
        return early

    def _submit_round(self, requests: Sequence[ProbeRequest], plan: TestPlan,
                      attempt: int = 0) -> dict[str, ProbeOutcome]:
        tasks, early = self.prepare_tasks(requests, plan)
        if not tasks:
            return early
        key = digest([t["commit"] for t in tasks] + [time.time()])[:12]
        rdir = self.round_dir(key)
        rdir.mkdir(parents=True, exist_ok=True)
        build, test_script = self.render(key, tasks, requests[0].runs, requests[0].policy,
                                         plan.image, plan.test)
        (rdir / "build.sh").write_text(build)
        (rdir / "test.sh").write_text(test_script)
        # Each job id is stored the moment sbatch returns it: a controller killed between
        # the two calls must not submit the build array again. Prebuilt artifacts need no
        # build: their rounds are a test array alone.
        builds = plan.artifacts == "build" or bool(self.recipe.companions)
        build_job = self._sbatch(rdir / "build.sh", []) if builds else None
        jobs = [SlurmJob(t["key"], key, t["index"], build_job, None, attempt, t["expect"],
                         time.time()) for t in tasks]
        for job in jobs:
            self.store.put_slurm_job(self.session, job)
        test_job = self._submit_tests(key, build_job)
        for job in jobs:
            self.store.put_slurm_job(self.session, replace(job, test_job=test_job))
        self.say(f"submitted {len(tasks)} probe(s): " + (f"build array {build_job}, "
                                                         if build_job else "prebuilt, ") +
                 f"test array {test_job}")
        return early

    def _submit_tests(self, key: str, build_job: str | None) -> str:
        after = [f"--dependency=afterok:{build_job}"] if build_job else []
        return self._sbatch(self.round_dir(key) / "test.sh", after)

    def _finish_submissions(self, known: dict[str, SlurmJob]) -> None:
        """Submit the test array of a round whose controller died right after its build
        array was submitted."""
        rounds = {job.round: job.build_job for job in known.values() if not job.test_job}
        for key, build_job in rounds.items():
            try:
                test_job = self._submit_tests(key, build_job)
            except UserError:   # the build job is long gone: its outcome files decide
                test_job = self._sbatch(self.round_dir(key) / "test.sh", [])
            for job in known.values():
                if job.round == key:
                    self.store.put_slurm_job(self.session, replace(job, test_job=test_job))
            self.say(f"submitted the test array {test_job} that an interrupted run had not")

    def _sbatch(self, script: Path, extra: list[str]) -> str:
        out = self.sched.run(["sbatch", "--parsable", *extra, str(script)], what="sbatch")
        return out.strip().split(";")[0]

    def _wait(self, by_key: dict[str, ProbeRequest], policy: RepeatPolicy,
              on_phase: PhaseCallback) -> Iterator[tuple[ProbeRequest, ProbeOutcome]]:
        """Look until every probe has an outcome; sooner after a look that saw progress."""
        pending = set(by_key)
        delay = self.s.poll_min
        while pending:
            events = self._look(pending, by_key, policy, on_phase)
            for key, outcome in events:
                if outcome is not None:       # None: ended and submitted again
                    pending.discard(key)
                    yield by_key[key], outcome
            delay = self.s.poll_min if events else min(delay * 1.5, self.s.poll_max)
            if pending:
                time.sleep(delay)

    def _look(self, pending: set[str], by_key: dict[str, ProbeRequest],
              policy: RepeatPolicy, on_phase: PhaseCallback
              ) -> list[tuple[str, ProbeOutcome | None]]:
        """One look: outcome files, then the queue, then the accounting of the tasks that
        left the queue without one."""
        jobs = self._jobs()
        events: list[tuple[str, ProbeOutcome | None]] = []
        for key in sorted(pending):
            outcome = self._outcome(jobs[key], policy)
            if outcome is not None:
                self.worktrees.remove(by_key[key].commit[:12])
                events.append((key, outcome))
        left = pending - {key for key, _ in events}
        states = self.sched.queue({j for k in left for j in (jobs[k].build_job, jobs[k].test_job)
                               if j}) if left else {}
        gone = []
        for key in sorted(left):
            phase = queue_phase(jobs[key], states)
            if phase is None:
                gone.append(jobs[key])
            elif phase in ("build", "test"):
                on_phase(by_key[key], phase)
        for job, ended in self._ended(gone):
            events.append((job.key, self._handle_end(job, ended, by_key[job.key])))
        return events

    def _result_path(self, job: SlurmJob) -> Path:
        return result_path(self.round_dir(job.round), job)

    def _outcome(self, job: SlurmJob, policy: RepeatPolicy) -> ProbeOutcome | None:
        outcome = read_result(self.round_dir(job.round), job, policy,
                              build_limit=self.build_timeout, test_limit=self.timeout,
                              companions=[c.label for c in self.recipe.companions])
        node = outcome.details.get("node") if outcome else None
        if self.s.same_node and self.node is None and node:
            self.node = node
        return outcome

    def _same_node(self) -> list[str]:
        """--same-node: every test job on the node of the session's first test run (a
        resumed session finds it in its probe records)."""
        if not self.s.same_node:
            return []
        if self.node is None:
            self.node = next((p.details["node"] for p in self.store.probes(self.session)
                              if p.details.get("node")), None) if self.session else None
        return [f"--nodelist={self.node}"] if self.node else []

    def _ended(self, gone: list[SlurmJob]) -> list[tuple[SlurmJob, str]]:
        """How tasks that left the queue without an outcome file ended: one sacct call."""
        gone = [job for job in gone if not self._result_path(job).exists()]
        if not gone:
            return []
        ids = sorted({j for job in gone for j in (job.build_job, job.test_job) if j})
        states = self.sched.accounting(ids)
        ended = []
        for job in gone:
            if self._result_path(job).exists():
                continue     # it finished between the two looks
            end = task_end(states.get(f"{job.test_job}_{job.task}"),
                           states.get(f"{job.build_job}_{job.task}"),
                           time.time() - job.submitted)
            if end is not None:
                ended.append((job, end))
        return ended

    def _handle_end(self, job: SlurmJob, state: str, req: ProbeRequest) -> ProbeOutcome | None:
        """The outcome of a task that ended without a result, or None when it was
        submitted again."""
        if self.cancelling:
            return None
        action = end_action(state, job.cancelled_by_us)
        if action == "resubmit":
            self.say(f"probe {req.commit[:12]} was cancelled by an interrupted run; resubmitting")
            return self._submit([req], attempt=job.attempt).get(req.key)
        if action == "retry":
            attempt = job.attempt + 1
            if attempt > self.s.max_retries:
                return ProbeOutcome(Verdict.SKIP, f"job {state.lower()} after {attempt} "
                                    "attempt(s)", cacheable=False)
            self.say(f"probe {req.commit[:12]} ended {state}; retry {attempt}/{self.s.max_retries}")
            return self._submit([req], attempt=attempt).get(req.key)
        return ProbeOutcome(Verdict.SKIP, ENDED_WITHOUT_RESULT.get(
            state, f"job {state.lower()} without a result"), cacheable=False)

    def submit_controller(self, session: str, argv: list[str], *, partition: str | None,
                          time_limit: str) -> tuple[str, Path]:
        """Submit `argv` (a whole bisection) as a small CPU batch job; returns (job id,
        its output file)."""
        script = write_controller(self.s, session, argv,
                                  partition=partition or self.s.partition,
                                  time_limit=time_limit)
        return self._sbatch(script, []), script.with_suffix(".out")

    def prefetch(self, images: Sequence[str], *, done: bool = False) -> None:
        if done:
            self.ahead.drop()
        elif self.s.runtime in ("enroot", "pyxis") and not self.cancelling:
            self.ahead.submit(images, self.job_tag)

    def dry_run(self, requests: Sequence[ProbeRequest]) -> list[tuple[str, str]]:
        """The batch scripts the next round would submit (nothing is checked out)."""
        self.session = requests[0].session
        tasks = [{"commit": r.commit, "worktree": str(self.worktrees.path(r.commit[:12])),
                  "index": i, "final": f"<artifact of {r.commit[:12]}>",
                  "staging": f"<staging of {r.commit[:12]}>",
                  "companions": [{"final": f"<{c.label} for {r.commit[:12]}>", "staging": "",
                                  "src": ""} for c in self.recipe.companions]}
                 for i, r in enumerate(requests)]
        build, test = self.render("DRYRUN", tasks, requests[0].runs, requests[0].policy)
        return [("build.sh", build), ("test.sh", test)]
