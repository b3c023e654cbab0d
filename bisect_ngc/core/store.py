"""State in SQLite: sessions, probes, and a result cache shared across sessions.

Every probe is committed the moment it finishes, so a killed run (SIGKILL included)
loses at most the probes that were still running. One process at a time may drive one
question's sessions (SessionLock); other questions run beside it on the same state.
Readers (status, log, report) need no lock and open the database read-only. A state
that cannot be used is a clear error, never a silent restart.
"""
from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..errors import UserError
from .filesystems import on_network
from .keys import CacheKey
from .records import (ProbeRecord, SessionParams, SessionRecord, SessionResult, SessionStatus,
                      SlurmJob, from_dict)
from .search import Verdict

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    status TEXT NOT NULL,
    params TEXT NOT NULL,
    candidates TEXT NOT NULL,
    result TEXT
);
CREATE TABLE IF NOT EXISTS probes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL REFERENCES sessions(id),
    round INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    commit_sha TEXT NOT NULL,
    verdict TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    exit_code INTEGER,
    build_s REAL,
    test_s REAL,
    runs TEXT NOT NULL DEFAULT '[]',
    cached INTEGER NOT NULL DEFAULT 0,
    started REAL,
    ended REAL,
    logs TEXT NOT NULL DEFAULT '{}',
    details TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS probes_by_session ON probes(session, idx);
CREATE TABLE IF NOT EXISTS cache (
    key TEXT PRIMARY KEY,
    repo TEXT NOT NULL,
    commit_sha TEXT NOT NULL,
    recipe TEXT NOT NULL,
    test TEXT NOT NULL,
    env TEXT NOT NULL,
    verdict TEXT NOT NULL,
    reason TEXT NOT NULL,
    exit_code INTEGER,
    build_s REAL,
    test_s REAL,
    runs TEXT NOT NULL,
    logs TEXT NOT NULL,
    details TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS commits (
    sha TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    author TEXT NOT NULL,
    date TEXT NOT NULL,
    pr INTEGER
);
CREATE TABLE IF NOT EXISTS slurm_jobs (
    session TEXT NOT NULL,
    key TEXT NOT NULL,
    round TEXT NOT NULL,
    task INTEGER NOT NULL,
    build_job TEXT,
    test_job TEXT,
    attempt INTEGER NOT NULL,
    expect TEXT NOT NULL,
    submitted REAL NOT NULL,
    cancelled_by_us INTEGER NOT NULL,
    PRIMARY KEY (session, key)
);
"""


_MOVE_HINT = "move the state directory aside (or pass another --state) and run again"


@contextmanager
def _creation_lock(root: Path) -> Iterator[None]:
    """Serialises opening the database, so that one process never reads another's
    freshly created, still empty file as a truncated state."""
    fd = os.open(root / "state.db.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass  # a filesystem without flock: the race stays, the open still works
        yield
    finally:
        os.close(fd)


def ensure_state_dir(root: Path) -> None:
    if root.exists() and not root.is_dir():
        raise UserError(f"the state directory {root} is a file",
                        hint="pass --state with a directory path")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the state directory {root}: {exc.strerror}",
                        hint="pass --state with a writable path") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise UserError(f"the state directory {root} is not writable",
                        hint="pass --state with a writable directory")


class Store:
    def __init__(self, root: Path, *, readonly: bool = False):
        self.root = Path(root)
        self.readonly = readonly
        db = self.root / "state.db"
        if readonly:
            self.db = self._open_readonly(db)
        else:
            ensure_state_dir(self.root)
            with _creation_lock(self.root):
                self.db = self._open_writable(db)
        self.db.row_factory = sqlite3.Row

    def _open_writable(self, db: Path) -> sqlite3.Connection:
        # An empty file is a truncated state only when no process is creating it now:
        # the caller holds the creation lock, so a new database is never half-made here.
        if db.exists() and db.stat().st_size == 0:
            raise UserError(f"the state database {db} is empty (truncated?)", hint=_MOVE_HINT)
        try:
            conn = sqlite3.connect(db, timeout=30, isolation_level=None,
                                   check_same_thread=False)
            self.journal = "DELETE" if on_network(self.root) else "WAL"
            conn.execute(f"PRAGMA journal_mode={self.journal}")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(SCHEMA)
            self.db = conn
            self._adopt_old_jobs()
        except sqlite3.DatabaseError as exc:
            raise UserError(f"cannot use the state database {db}: {exc}",
                            hint=_MOVE_HINT) from None
        return conn

    def _adopt_old_jobs(self) -> None:
        """Slurm job ids that an earlier version kept as 'probe:KEY' JSON in `jobs` move
        to `slurm_jobs`, so a session in flight across an upgrade still re-attaches."""
        old = self.db.execute("SELECT name FROM sqlite_master WHERE name='jobs'").fetchone()
        if old is None:
            return
        rows = self.db.execute("SELECT session, name, value FROM jobs").fetchall()
        for sid, name, value in rows:
            if name.startswith("probe:"):
                self.put_slurm_job(sid, from_dict(SlurmJob, dict(json.loads(value),
                                                                 key=name[len("probe:"):])))
        self.db.execute("DROP TABLE jobs")

    def _open_readonly(self, db: Path) -> sqlite3.Connection:
        if not self.root.is_dir():
            raise UserError(f"no state directory at {self.root}",
                            hint="run `bisect-ngc bisect ...` first, or pass --state")
        if not db.exists():
            raise UserError(f"no bisect session in {self.root}",
                            hint="run `bisect-ngc bisect ...` first, or pass --state")
        if db.stat().st_size == 0:
            raise UserError(f"the state database {db} is empty (truncated?)", hint=_MOVE_HINT)
        last: Exception | None = None
        # mode=ro needs a writable directory for WAL's shared memory; immutable does not.
        for query in ("mode=ro", "immutable=1"):
            try:
                conn = sqlite3.connect(f"{db.resolve().as_uri()}?{query}", uri=True, timeout=30,
                                       check_same_thread=False)
                conn.execute("SELECT count(*) FROM sessions").fetchone()
                return conn
            except sqlite3.DatabaseError as exc:
                last = exc
                if "not a database" in str(exc) or "malformed" in str(exc):
                    break
        raise UserError(f"cannot read the state database {db}: {last}", hint=_MOVE_HINT)

    def close(self) -> None:
        self.db.close()

    def rel(self, path: Path) -> str:
        """Paths are stored relative to the state directory."""
        return os.path.relpath(path, self.root)

    # sessions
    def session(self, sid: str) -> SessionRecord | None:
        row = self.db.execute("SELECT * FROM sessions WHERE id=?", (sid,)).fetchone()
        return _session(row) if row else None

    def sessions(self) -> list[SessionRecord]:
        rows = self.db.execute("SELECT * FROM sessions ORDER BY updated DESC").fetchall()
        return [_session(r) for r in rows]

    def latest(self) -> SessionRecord | None:
        found = self.sessions()
        return found[0] if found else None

    def find(self, prefix: str | None) -> SessionRecord:
        if not prefix:
            rec = self.latest()
            if rec is None:
                raise UserError(f"no bisect session in {self.root}",
                                hint="run `bisect-ngc bisect ...` first, or pass --state")
            return rec
        rows = self.db.execute("SELECT * FROM sessions WHERE id LIKE ?", (prefix + "%",)).fetchall()
        if len(rows) != 1:
            known = ", ".join(s.id for s in self.sessions()[:10]) or "none"
            raise UserError(f"session '{prefix}' {'is ambiguous' if rows else 'not found'}",
                            hint=f"known sessions: {known}")
        return _session(rows[0])

    def create_session(self, sid: str, params: SessionParams, candidates: list[str]) -> None:
        now = time.time()
        self.db.execute(
            "INSERT INTO sessions(id, created, updated, status, params, candidates) "
            "VALUES (?,?,?,?,?,?)",
            (sid, now, now, SessionStatus.RUNNING.value, json.dumps(asdict(params)),
             "\n".join(candidates)))

    def set_status(self, sid: str, status: SessionStatus,
                   result: SessionResult | None = None) -> None:
        self.db.execute("UPDATE sessions SET status=?, updated=?, result=COALESCE(?, result) "
                        "WHERE id=?", (status.value, time.time(),
                                       json.dumps(asdict(result)) if result else None, sid))

    def reopen(self, sid: str) -> None:
        """A finished session goes on (a judge continues it): its old answer is no answer."""
        self.db.execute("UPDATE sessions SET status=?, updated=?, result=NULL WHERE id=?",
                        (SessionStatus.RUNNING.value, time.time(), sid))

    # probes
    def add_probe(self, sid: str, p: ProbeRecord) -> None:
        self._insert("INSERT", "probes", dict(_columns(p), session=sid))
        self.db.execute("UPDATE sessions SET updated=? WHERE id=?", (time.time(), sid))

    def probes(self, sid: str) -> list[ProbeRecord]:
        """The search's probes (the answer's fresh re-runs are `checks`)."""
        return [p for p in self._all_probes(sid) if not p.details.get("verify")]

    def checks(self, sid: str) -> list[ProbeRecord]:
        """The probes that ran the answer's pair again before it was given (rerun.py)."""
        return [p for p in self._all_probes(sid) if p.details.get("verify")]

    def _all_probes(self, sid: str) -> list[ProbeRecord]:
        rows = self.db.execute("SELECT * FROM probes WHERE session=? ORDER BY id", (sid,))
        return [_probe(r) for r in rows.fetchall()]

    def verdicts(self, sid: str) -> dict[int, Verdict]:
        return {p.idx: p.verdict for p in self.probes(sid)}

    # cache
    def cache_get(self, key: CacheKey, *, skips: bool = True) -> ProbeRecord | None:
        row = self.db.execute("SELECT * FROM cache WHERE key=?", (key.key,)).fetchone()
        if row is None or (not skips and row["verdict"] == Verdict.SKIP.value):
            return None
        return _probe(row, round=0, idx=-1, cached=True)

    def cache_put(self, key: CacheKey, p: ProbeRecord) -> None:
        row = {c: v for c, v in _columns(p).items() if c not in _SESSION_ONLY}
        self._insert("INSERT OR REPLACE", "cache",
                     dict(row, key=key.key, repo=key.repo, commit_sha=key.commit,
                          recipe=key.recipe, test=key.test, env=key.env, created=time.time()))

    def _insert(self, verb: str, table: str, row: dict[str, Any]) -> None:
        self.db.execute(f"{verb} INTO {table}({', '.join(row)}) "
                        f"VALUES ({','.join('?' * len(row))})", tuple(row.values()))

    # correcting the memory (`bisect-ngc forget`)
    def known_commits(self, prefix: str) -> list[str]:
        """The commits with a cached verdict or a probe whose sha starts with `prefix`."""
        rows = self.db.execute(
            "SELECT commit_sha FROM cache WHERE commit_sha LIKE ? UNION "
            "SELECT commit_sha FROM probes WHERE commit_sha LIKE ?",
            (prefix + "%", prefix + "%")).fetchall()
        return sorted({r[0] for r in rows})

    def forget_cached(self, commits: Iterable[str] | None = None,
                      tests: Iterable[str] | None = None) -> int:
        """Delete cached verdicts of these commits and/or test keys; how many went."""
        clauses: list[str] = []
        args: list[str] = []
        for column, values in (("commit_sha", commits), ("test", tests)):
            if values is not None:
                values = list(values)
                clauses.append(f"{column} IN ({','.join('?' * len(values))})")
                args += values
        if not clauses:
            return 0
        cur = self.db.execute(f"DELETE FROM cache WHERE {' AND '.join(clauses)}", args)
        return cur.rowcount

    def forget_probes(self, sessions: Iterable[str], commits: Iterable[str]) -> int:
        """Delete these sessions' probes of these commits (a resume runs them again)."""
        sids, shas = list(sessions), list(commits)
        if not sids or not shas:
            return 0
        cur = self.db.execute(
            f"DELETE FROM probes WHERE session IN ({','.join('?' * len(sids))}) AND "
            f"commit_sha IN ({','.join('?' * len(shas))})", sids + shas)
        return cur.rowcount

    # commit metadata, so reports need no repository
    def remember_commits(self, infos: Iterable[Any]) -> None:
        self.db.executemany("INSERT OR REPLACE INTO commits(sha, title, author, date, pr) "
                            "VALUES (?,?,?,?,?)",
                            [(i.sha, i.title, i.author, i.date, i.pr) for i in infos])

    def commits(self, shas: Iterable[str]) -> dict[str, sqlite3.Row]:
        shas = list(shas)
        out = {}
        for start in range(0, len(shas), 500):
            chunk = shas[start:start + 500]
            rows = self.db.execute(f"SELECT * FROM commits WHERE sha IN "
                                   f"({','.join('?' * len(chunk))})", chunk).fetchall()
            out.update({r["sha"]: r for r in rows})
        return out

    # Slurm's job ids, so a re-run can re-attach
    def put_slurm_job(self, sid: str, job: SlurmJob) -> None:
        self._insert("INSERT OR REPLACE", "slurm_jobs", dict(asdict(job), session=sid))

    def slurm_jobs(self, sid: str) -> dict[str, SlurmJob]:
        rows = self.db.execute("SELECT * FROM slurm_jobs WHERE session=?", (sid,)).fetchall()
        return {r["key"]: from_dict(SlurmJob, dict(r, cancelled_by_us=bool(r["cancelled_by_us"])))
                for r in rows}


def _session(row: sqlite3.Row) -> SessionRecord:
    result = json.loads(row["result"]) if row["result"] else None
    return SessionRecord(id=row["id"], created=row["created"], updated=row["updated"],
                         status=SessionStatus(row["status"]),
                         params=from_dict(SessionParams, json.loads(row["params"])),
                         candidates=row["candidates"].split("\n") if row["candidates"] else [],
                         result=from_dict(SessionResult, result) if result else None)


# The one mapping between a ProbeRecord and a row of `probes` or `cache`.
_JSON = ("runs", "logs", "details")
_SESSION_ONLY = ("round", "idx", "cached", "started", "ended")   # the cache has no rounds


def _col(name: str) -> str:
    return "commit_sha" if name == "commit" else name


def _columns(p: ProbeRecord) -> dict[str, Any]:
    row = {_col(f.name): getattr(p, f.name) for f in fields(ProbeRecord)}
    row.update({k: json.dumps(row[k]) for k in _JSON}, verdict=p.verdict.value,
               cached=int(p.cached))
    return row


def _probe(row: sqlite3.Row, **given: Any) -> ProbeRecord:
    names = set(row.keys())
    values = {f.name: row[_col(f.name)] for f in fields(ProbeRecord) if _col(f.name) in names}
    values.update({k: json.loads(values[k]) for k in _JSON},
                  verdict=Verdict(values["verdict"]), **given)
    values["cached"] = bool(values.get("cached"))
    return ProbeRecord(**values)
