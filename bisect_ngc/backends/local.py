"""Build and test on this host, in the style of `git bisect run`."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from ..history import Worktrees
from ..search import Verdict
from . import (Cancelled, PhaseCallback, ProbeOutcome, ProbeRequest, TestRun, ThreadedRounds,
               last_json_line, run_tests, verdict_from_exit)


class ProcessRunner:
    """Runs commands in their own process groups so that all of them can be stopped."""

    def __init__(self) -> None:
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self.cancelled = threading.Event()

    def run(self, argv: list[str], *, cwd: Path, env: dict[str, str], log: Path,
            timeout: float | None) -> tuple[int | None, float, bool]:
        """Returns (exit code or -signal, seconds, timed out)."""
        if self.cancelled.is_set():
            raise Cancelled()
        log.parent.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        with open(log, "ab") as out:
            out.write(f"$ {' '.join(argv)}\n".encode())
            out.flush()
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            with self._lock:
                self._procs.add(proc)
            timed_out = False
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc, signal.SIGKILL)
                proc.wait()
            finally:
                with self._lock:
                    self._procs.discard(proc)
        if self.cancelled.is_set():
            raise Cancelled()
        return proc.returncode, time.monotonic() - start, timed_out

    def cancel(self, grace: float = 3.0) -> None:
        self.cancelled.set()
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            _kill_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill_group(proc, signal.SIGKILL)


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class LocalBackend(ThreadedRounds):
    name = "local"

    def __init__(self, worktrees: Worktrees, *, build: str | None, test: str,
                 timeout: float | None = None, build_timeout: float | None = None,
                 clean: bool = True):
        self.worktrees = worktrees
        self.build_cmd = build
        self.test_cmd = test
        self.timeout = timeout
        self.build_timeout = build_timeout
        self.clean = clean
        self.runner = ProcessRunner()
        self._checkout_lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "build": self.build_cmd, "test": self.test_cmd,
                "timeout": self.timeout, "host": socket.gethostname()}

    def environment(self) -> str:
        return f"local:{socket.gethostname()}"

    def recipe(self) -> dict[str, Any]:
        return {"build": self.build_cmd, "clean": self.clean}

    def test_recipe(self) -> dict[str, Any]:
        return {"test": self.test_cmd, "timeout": self.timeout}

    def prepare(self) -> None:
        pass

    def cancel(self) -> None:
        self.runner.cancel()

    def _probe(self, req: ProbeRequest, on_phase: PhaseCallback) -> ProbeOutcome:
        wt = self._checkout(req, on_phase, clean=self.clean)
        req.artifacts.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, **probe_env(req, wt))
        logs: dict[str, Path] = {}
        build_s = None
        if self.build_cmd:
            on_phase(req, "build")
            logs["build"] = req.log_dir / "build.log"
            code, build_s, timed_out = self.runner.run(
                ["/bin/sh", "-c", self.build_cmd], cwd=wt, env=env, log=logs["build"],
                timeout=self.build_timeout)
            if timed_out or code != 0:
                reason = (f"build timed out after {self.build_timeout:g}s" if timed_out
                          else f"build failed (exit {code})")
                return ProbeOutcome(Verdict.SKIP, reason, exit_code=code, build_s=build_s,
                                    logs=logs)

        def once(i: int) -> TestRun:
            logs[f"test-{i}"] = log = req.log_dir / f"test-{i}.log"
            code, secs, timed_out = self.runner.run(["/bin/sh", "-c", self.test_cmd], cwd=wt,
                                                    env=env, log=log, timeout=self.timeout)
            verdict, reason = verdict_from_exit(code)
            if timed_out:
                verdict, reason = Verdict.SKIP, f"test timed out after {self.timeout:g}s"
            return TestRun(verdict, reason, code, secs, last_json_line(_tail(log)))

        outcome = run_tests(req, on_phase, once)
        outcome.build_s, outcome.logs = build_s, logs
        return outcome


def probe_env(req: ProbeRequest, worktree: Path) -> dict[str, str]:
    return {"BISECT_COMMIT": req.commit, "BISECT_WORKTREE": str(worktree),
            "BISECT_ARTIFACTS": str(req.artifacts)}


def _tail(path: Path, size: int = 65536) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - size))
        return f.read().decode(errors="replace")
