"""What executors share beyond their interface (core/probes.py): prebuilt artifacts for a
probe, its environment variables, capped logs, the test's JSON line, and ThreadedRounds, the
thread pool of worktree slots that the local and Docker backends run rounds on.
"""
from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from ..errors import UserError
from ..core.probes import (Cancelled, PhaseCallback, ProbeFailed, ProbeRequest)
from ..vcs.build_trees import settle
from ..vcs.mirrors import CheckoutError
from ..core.search import Verdict, runs_settled
from ..core.verdicts import (BuildFact, ProbeOutcome, RunFact, judge_build, judge_probe,
                             judge_run)

if TYPE_CHECKING:
    from ..core.artifacts import ArtifactStore


def fetch_prebuilt(artifacts: "ArtifactStore", req: ProbeRequest,
                   say: Callable[[str], None]) -> Path:
    """The directory holding the probe's prebuilt artifact; a failed download is this
    probe's skip (ProbeFailed), not the session's end."""
    source = req.source
    if source is None:
        raise ProbeFailed("a prebuilt probe without a source")
    if source.tier == "overlay":          # written into the store by the controller
        art = artifacts.get(source.ref)
        if art is None:
            raise ProbeFailed(f"the {source.label} artifact is missing from the store")
        return art.path
    try:
        return artifacts.fetch(source.ref, say).path
    except (OSError, ValueError) as exc:
        raise ProbeFailed(f"could not download {source.label}: {exc}") from None


def process_start(pid: int) -> str | None:
    """The kernel's start time of pid (tells a reused pid apart), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def controller() -> str:
    """This process, as a label on what it starts: pid and start time."""
    return f"{os.getpid()}:{process_start(os.getpid())}"


def controller_alive(label: str | None) -> bool:
    """Whether the process a `controller()` label names still runs (another session's,
    whose containers or processes must be left alone)."""
    pid, _, start = (label or "").partition(":")
    return pid.isdigit() and int(pid) != os.getpid() and process_start(int(pid)) == start


def probe_env(req: ProbeRequest, worktree: Path) -> dict[str, str]:
    return {"BISECT_COMMIT": req.commit, "BISECT_WORKTREE": str(worktree),
            "BISECT_ARTIFACTS": str(req.artifacts_dir)}


# A log past LOG_CAP keeps its first LOG_HEAD bytes and its end (where errors and the
# test's JSON line are); the middle goes, with a line that says so.
LOG_CAP, LOG_HEAD = 16 << 20, 1 << 20


def cap_log(path: Path, cap: int = LOG_CAP, head: int = LOG_HEAD) -> None:
    try:
        size = path.stat().st_size
    except OSError:
        return
    if size <= cap:
        return

    def words(cut: int) -> bytes:
        return f"\n[bisect-ngc: {cut} bytes of this log cut; its start and end are kept]\n" \
            .encode()
    tail = cap - head - len(words(size - cap)) - 1      # the count has one digit more at most
    marker = words(size - head - tail)
    with open(path, "r+b") as f:
        f.seek(size - tail)
        end = f.read()
        f.seek(head)
        f.write(marker + end)
        f.truncate()


def last_json_line(text: str) -> dict[str, Any]:
    """The repro protocol's last stdout line, if it is a JSON object."""
    for line in reversed(text.strip().splitlines()[-5:]):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                value = json.loads(line)
            except ValueError:
                return {}
            return value if isinstance(value, dict) else {}
    return {}


def run_tests(req: ProbeRequest, on_phase: PhaseCallback,
              run_once: Callable[[int], RunFact] | None, build: BuildFact | None) -> ProbeOutcome:
    """Up to req.runs test executions, stopping once the verdict is settled; none when
    the build failed."""
    expect = req.expected
    facts: list[RunFact] = []
    if run_once is None or (build is not None and judge_build(build) is not None):
        return judge_probe(build, facts, req.policy, expect)
    for i in range(1, req.runs + 1):
        on_phase(req, "test" if req.runs == 1 else f"test {i}/{req.runs}")
        facts.append(run_once(i))
        if runs_settled([judge_run(f, expect)[0] for f in facts], req.runs, req.policy):
            break
    return judge_probe(build, facts, req.policy, expect)


class ThreadedRounds:
    """run_round for backends that drive each probe from a thread of this process.

    Subclasses have `worktrees` and implement `_probe` and `cancel`. A CheckoutError or a
    ProbeFailed raised by a probe makes it a skip with its reason; a BackendLost ends the
    session."""

    worktrees: Any
    recipe: Any

    def __init__(self) -> None:
        self._checkout_lock = threading.Lock()
        self._checkout_s: dict[str, float] = {}
        self._tree_notes: dict[str, str] = {}

    def _probe(self, req: ProbeRequest, on_phase: PhaseCallback) -> ProbeOutcome:
        raise NotImplementedError

    def cancel(self) -> None:
        raise NotImplementedError

    def dry_run(self, requests: Sequence[ProbeRequest]) -> list[tuple[str, str]]:
        return []           # these backends run commands, not scripts they render

    def prefetch(self, images: Sequence[str], *, done: bool = False) -> None:
        return None         # no images to get, unless a backend says otherwise

    def submit_controller(self, session: str, argv: list[str], *, partition: str | None,
                          time_limit: str) -> tuple[str, Path]:
        raise UserError(f"the {getattr(self, 'name', 'this')} backend has no scheduler to "
                        "submit a controller to", hint="`slurm submit` uses --backend slurm")

    def build_trees(self, slot: int) -> list[Path]:
        """Build trees this backend keeps for a slot outside its worktree."""
        return []

    def _kept(self, req: ProbeRequest, clean: bool) -> list[Path]:
        """What survives the checkout of the slot's worktree besides tracked files."""
        wt = self.worktrees.path(req.slot)
        if not (wt / ".git").exists():
            return self.build_trees(req.slot)
        inside = [wt / p.strip("/") for p in self.recipe.keep] if clean else [wt]
        return inside + self.build_trees(req.slot)

    def _checkout(self, req: ProbeRequest, on_phase: PhaseCallback, *, clean: bool) -> Path:
        on_phase(req, "checkout")
        start = time.monotonic()
        r = self.recipe
        note = settle(self._kept(req, clean))
        if note:
            self._tree_notes[req.commit] = note
        try:
            with self._checkout_lock:
                return self.worktrees.checkout(req.slot, req.commit, clean=clean,
                                               keep=tuple(r.keep), submodules=r.submodules)
        finally:
            self._checkout_s[req.commit] = time.monotonic() - start

    def run_round(self, requests: Sequence[ProbeRequest],
                  on_phase: PhaseCallback) -> Iterator[tuple[ProbeRequest, ProbeOutcome]]:
        pool = ThreadPoolExecutor(max_workers=max(1, len(requests)))
        futures = {pool.submit(self._guarded, req, on_phase): req for req in requests}
        pending = set(futures)
        try:
            while pending:
                # Wake up now and then: a signal caught by a worker thread is only acted on
                # when the main thread runs Python code.
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield futures[fut], fut.result()
        except BaseException:
            self.cancel()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _guarded(self, req: ProbeRequest, on_phase: PhaseCallback) -> ProbeOutcome:
        try:
            outcome = self._probe(req, on_phase)
        except (CheckoutError, ProbeFailed) as exc:
            outcome = ProbeOutcome(Verdict.SKIP, str(exc), cacheable=False)
        except Cancelled:
            return ProbeOutcome(Verdict.SKIP, "interrupted", transient=True)
        outcome.checkout_s = self._checkout_s.pop(req.commit, None)
        note = self._tree_notes.pop(req.commit, None)
        if note:
            outcome.details = dict(outcome.details, kept_tree=note)
        return outcome
