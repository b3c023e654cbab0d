"""Correcting the memory: `forget` drops verdicts (of a commit, a session or a test) so
that the next run probes them again, and `gc` removes the worktrees no running session
holds. Each says what it removed."""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.artifacts import ArtifactStore
from ..core.keys import digest
from ..core.kept_builds import KeptBuild
from ..core.records import finished
from ..core.session_lock import SessionLock
from ..core.store import Store
from ..errors import UserError
from ..vcs.worktrees import lanes, remove_lane

TIERS = ("image", "nightly", "prebuilt", "overlay")


@dataclass
class Forgotten:
    cached: int = 0                     # cached verdicts deleted
    probes: int = 0                     # probes of unfinished sessions deleted
    builds: list[str] = field(default_factory=list)    # kept builds removed
    running: list[str] = field(default_factory=list)   # sessions left alone: they run now

    def as_dict(self) -> dict[str, Any]:
        return {"cached": self.cached, "probes": self.probes, "builds": self.builds,
                "running": self.running}


def forget(store: Store, cache_dir: Path, *, commit: str | None = None,
           session: str | None = None, test: str | None = None) -> Forgotten:
    """Drop what the state remembers of one commit (every cached verdict, its probes in
    unfinished sessions, its kept builds), one session (the verdicts it cached, and its
    probes if unfinished) or one test command (every verdict cached under it)."""
    if sum(x is not None for x in (commit, session, test)) != 1:
        raise UserError("say what to forget: one of --commit, --session or --test",
                        hint="e.g. bisect-ngc forget --commit 1a2b3c4d")
    out = Forgotten()
    if commit is not None:
        sha = _one_commit(store, commit, _kept_commits(store.root))
        out.cached = store.forget_cached(commits=[sha])
        out.probes = _unfinished_probes(store, [s.id for s in store.sessions()], [sha], out)
        out.builds = _kept_builds(store.root, cache_dir, sha)
    elif session is not None:
        rec = store.find(session)
        shas = sorted({p.commit for p in store.probes(rec.id)})
        out.cached = store.forget_cached(commits=shas, tests=_test_keys([rec]))
        out.probes = _unfinished_probes(store, [rec.id], shas, out)
    else:
        recs = [s for s in store.sessions() if s.params.recipe.get("test") == test]
        if not recs:
            raise UserError("no session in this state ran that test command",
                            hint="give --test exactly as the bisection did; `bisect-ngc "
                                 "status --json` lists the sessions")
        out.cached = store.forget_cached(tests=_test_keys(recs))
    return out


def _kept_commits(state: Path) -> set[str]:
    return {p.name.removesuffix(".kept.json") for p in (state / "artifacts").glob("*/*.kept.json")}


def _one_commit(store: Store, prefix: str, kept: set[str]) -> str:
    if not prefix or not all(c in "0123456789abcdef" for c in prefix.lower()):
        raise UserError(f"'{prefix}' is not a commit sha",
                        hint="give the sha (or its first digits) that `bisect-ngc log` shows")
    found = sorted(set(store.known_commits(prefix.lower())) |
                   {sha for sha in kept if sha.startswith(prefix.lower())})
    if len(found) != 1:
        raise UserError(f"commit '{prefix}' is {'ambiguous' if found else 'not in this state'}",
                        hint="give more digits" if found else
                        "`bisect-ngc log` shows the probed commits (and pass the same --state)")
    return found[0]


def _test_keys(recs: list[Any]) -> list[str]:
    """The cache's test keys of these sessions: their builds' and each prebuilt tier's."""
    keys = [r.params.identity.get("test") for r in recs]
    return sorted({k for key in keys if key for k in [key, *(digest([key, t]) for t in TIERS)]})


def _unfinished_probes(store: Store, sids: list[str], shas: list[str], out: Forgotten) -> int:
    """Probes of unfinished sessions go too (a resume would read them); a session that
    runs now is left alone and named."""
    open_ = [s for s in store.sessions() if s.id in sids and not finished(s.status)]
    running = [s.id for s in open_ if SessionLock.held(store.root, s.params.key)]
    out.running = running
    return store.forget_probes([s.id for s in open_ if s.id not in running], shas)


def _kept_builds(state: Path, cache_dir: Path, sha: str) -> list[str]:
    """The commit's kept local builds (STATE/artifacts: each once no test uses it) and its
    builds in the artifact store (CACHE/artifacts)."""
    removed = []
    for meta in sorted((state / "artifacts").glob(f"*/{sha}.kept.json")):
        kept = KeptBuild(meta.with_name(sha))
        with kept.locked(exclusive=True):
            kept.drop()
        removed.append(str(kept.artifacts))
    store = ArtifactStore(cache_dir / "artifacts")
    for art in store.entries():
        if art.meta.get("commit") == sha:
            shutil.rmtree(art.path, ignore_errors=True)
            removed.append(str(art.path))
    return removed


@dataclass(frozen=True)
class Collected:
    path: str
    size: int
    in_use: bool           # a running session holds it
    removed: bool


def collect(state: Path, *, dry_run: bool = False) -> list[Collected]:
    """Every lane of worktrees under the state (and its Slurm shared directory); the free
    ones removed, unless `dry_run`."""
    found = []
    for base in sorted(p for top in (state / "worktrees", state / "slurm" / "worktrees")
                       if top.is_dir() for p in top.iterdir() if p.is_dir()):
        for lane in lanes(base):
            size = lane.size
            removed = not lane.in_use and not dry_run and remove_lane(lane)
            found.append(Collected(str(lane.path), size, lane.in_use or not (dry_run or removed),
                                   removed))
        if not dry_run and not any(l.in_use for l in lanes(base)):
            shutil.rmtree(base / "home.git", ignore_errors=True)
    return found
