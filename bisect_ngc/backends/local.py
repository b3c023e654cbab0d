"""Build and test on this host, in the style of `git bisect run`.

Commands run in process groups of their own, so that all of them can be stopped. Each
group is recorded under STATE/running while it runs: a controller killed outright (SIGKILL,
a lost terminal) leaves its tests running, and the next run in that state directory kills
those leftovers before it starts probing again.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ..core.artifacts import ArtifactStore
from ..core.kept_builds import KeptBuild
from ..vcs.worktrees import Worktrees
from ..core.verdicts import BuildFact, RunFact
from ..core.probes import (BackendSetup, Cancelled, PhaseCallback, ProbeFailed, ProbeRequest,
                           test_plan)
from ..core.verdicts import ProbeOutcome
from .base import (ThreadedRounds, cap_log, fetch_prebuilt, last_json_line, probe_env,
                   controller, controller_alive, process_start, run_tests)


class ProcessRunner:
    """Runs commands in their own process groups, recorded in `ledger` while they run."""

    def __init__(self, ledger: Path) -> None:
        self.ledger = ledger
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self.cancelled = threading.Event()

    def run(self, argv: list[str], *, cwd: Path, env: dict[str, str], log: Path,
            timeout: float | None) -> tuple[int | None, float, bool]:
        """Returns (exit code or -signal, seconds, timed out)."""
        if self.cancelled.is_set():
            raise Cancelled()
        log.parent.mkdir(parents=True, exist_ok=True)
        self.ledger.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        with open(log, "wb") as out:
            out.write(f"$ {' '.join(argv)}\n".encode(errors="surrogateescape"))
            out.flush()
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            entry = self.ledger / f"{proc.pid}.json"
            entry.write_text(json.dumps({"pgid": proc.pid, "start": process_start(proc.pid),
                                         "controller": controller()}))
            with self._lock:
                self._procs.add(proc)
            timed_out = False
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc.pid, signal.SIGKILL)
                proc.wait()
            finally:
                _kill_group(proc.pid, signal.SIGKILL)    # whatever the command left behind
                with self._lock:
                    self._procs.discard(proc)
                entry.unlink(missing_ok=True)
        cap_log(log)
        if self.cancelled.is_set():
            raise Cancelled()
        return proc.returncode, time.monotonic() - start, timed_out

    def cancel(self, grace: float = 3.0) -> None:
        self.cancelled.set()
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            _kill_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid, signal.SIGKILL)

    def reap_leftovers(self) -> int:
        """Kill the process groups an earlier, killed controller left running."""
        killed = 0
        for entry in sorted(self.ledger.glob("*.json")) if self.ledger.is_dir() else []:
            try:
                rec = json.loads(entry.read_text())
            except (OSError, ValueError):
                entry.unlink(missing_ok=True)
                continue
            if controller_alive(str(rec.get("controller"))):
                continue     # another session's, running now
            if rec.get("start") and process_start(rec["pgid"]) == rec["start"]:
                _kill_group(rec["pgid"], signal.SIGKILL)
                killed += 1
            entry.unlink(missing_ok=True)
        return killed


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class LocalBackend(ThreadedRounds):
    name = "local"
    tiers: tuple[str, ...] = ("nightly", "prebuilt")   # downloaded artifacts, no images

    def __init__(self, worktrees: Worktrees, recipe, *, state: Path,
                 artifacts: ArtifactStore | None = None, say=lambda text: None,
                 rebuild: bool = False):
        super().__init__()
        self.worktrees = worktrees
        self.recipe = recipe
        self.artifacts = artifacts
        self.say = say
        self.rebuild = rebuild           # --rebuild: never reuse a kept build
        self._said_not_kept = False
        self.runner = ProcessRunner(state / "running")

    def containers(self) -> None:
        return None         # this host runs no images

    @classmethod
    def create(cls, setup: BackendSetup) -> "LocalBackend":
        return cls(setup.worktrees(setup.options["worktrees"]), setup.recipe,
                   state=setup.state, artifacts=ArtifactStore(setup.artifact_store), say=setup.say,
                   rebuild=bool(setup.options.get("rebuild")))

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "host": socket.gethostname()}

    def environment(self) -> str:
        return f"local:{socket.gethostname()}"

    def prepare(self) -> None:
        killed = self.runner.reap_leftovers()
        if killed:
            self.say(f"killed {killed} test or build process group(s) left running by an "
                     "interrupted run")

    def cancel(self) -> None:
        self.runner.cancel()

    def _probe(self, req: ProbeRequest, on_phase: PhaseCallback) -> ProbeOutcome:
        r = self.recipe
        wt = self._checkout(req, on_phase, clean=r.clean)
        req.artifacts_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, **r.env, **probe_env(req, wt))
        logs: dict[str, Path] = {}
        plan = test_plan(req, r)

        def once(i: int) -> RunFact:
            logs[f"test-{i}"] = log = req.log_dir / f"test-{i}.log"
            code, secs, timed_out = self.runner.run(["/bin/sh", "-c", plan.test], cwd=wt,
                                                    env=env, log=log, timeout=r.timeout)
            return RunFact(code, secs, timed_out, r.timeout, last_json_line(_tail(log)))

        if plan.artifacts == "ready":
            on_phase(req, "download")
            if self.artifacts is None:
                raise ProbeFailed("no artifact store: this backend cannot fetch prebuilt artifacts")
            env["BISECT_ARTIFACTS"] = str(fetch_prebuilt(self.artifacts, req, self.say))
        if plan.artifacts != "build" or not r.build:
            outcome = run_tests(req, on_phase, once, None)
        else:
            with self._built(req, on_phase, wt, env, logs) as (build, details):
                outcome = run_tests(req, on_phase, once, build)
            outcome.details = dict(outcome.details, **details)
        outcome.logs = logs
        return outcome

    @contextmanager
    def _built(self, req: ProbeRequest, on_phase: PhaseCallback, wt: Path,
               env: dict[str, str], logs: dict[str, Path]
               ) -> Iterator[tuple[BuildFact | None, dict[str, Any]]]:
        """The commit's kept build put back into the worktree (no BuildFact), or a fresh
        build, kept when it can be (kept_builds.py); held for the tests that use it."""
        r, kept = self.recipe, KeptBuild(req.artifacts_dir)
        stop = self.runner.cancelled.is_set
        try:
            while not self.rebuild:
                with kept.locked(exclusive=False, stop=stop):
                    if kept.usable(wt) is None:
                        break
                    kept.restore(wt, r.keep if r.clean else [])
                    yield None, {"build_reused": True}
                    return
            with kept.locked(exclusive=True, stop=stop):
                on_phase(req, "build")
                kept.clear()
                logs["build"] = req.log_dir / "build.log"
                code, secs, timed_out = self.runner.run(
                    ["/bin/sh", "-c", r.build], cwd=wt, env=env, log=logs["build"],
                    timeout=r.build_timeout)
                why = kept.keep(wt, secs) if code == 0 and not timed_out else None
            if why:
                self._not_kept(req.commit, why)
            with kept.locked(exclusive=False, stop=stop):
                yield BuildFact(code, secs, timed_out, r.build_timeout), \
                    ({"build_not_kept": why} if why else {})
        except InterruptedError:
            raise Cancelled() from None

    def _not_kept(self, commit: str, why: str) -> None:
        if not self._said_not_kept:
            self._said_not_kept = True
            self.say(f"the build of {commit[:12]} is not kept ({why}): each probe of such a "
                     "commit builds again")


def _tail(path: Path, size: int = 65536) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - size))
        return f.read().decode(errors="replace")
