"""Histories with a planted answer, for the accuracy benchmark (benchmarks/accuracy) and
its tests: real git repositories made with `git fast-import`, a build and a test script
that bisect-ngc and `git bisect run` both run, and the truth by construction.

Every repository's files say how each commit behaves:
- `behaviour`: "old" or "new" (the change under search);
- `broken`: the commit cannot be tested (the test exits 125);
- `bug`: an unrelated failure the commit still has (the test fails);
- `needs`: the test needs `feature` present (else it fails);
- `combo_a` and `combo_b`: together they fail (a merge that breaks while both parents pass).

The test script draws flaky outcomes from a seeded stream numbered by the runs so far
(a counter file), so a case replays exactly: the failing side shows its failure with
probability `q`, the passing side fails for an unrelated reason with probability `eps`.
"""
from __future__ import annotations

import random
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

TEST = """#!/bin/sh
# one run of the planted test: exit 0 old, 1 new, 125 untestable
echo "$(git rev-parse HEAD)" >> {runs}
test -e broken && exit 125
if [ -e combo_a ] && [ -e combo_b ]; then exit 1; fi
if [ -e needs ] && [ ! -e feature ]; then exit 1; fi
test -e bug && exit 1
{verdict}
"""
DETERMINISTIC = 'test "$(cat behaviour)" = old'
FLAKY = """n=$(wc -l < {runs})
python3 -c 'import random, sys
new = open("behaviour").read().strip() == "new"
draw = random.Random("{seed}:" + sys.argv[1]).random()
sys.exit(1 if draw < ({q} if new else {eps}) else 0)' "$n"
"""
BUILD = """#!/bin/sh
echo "$(git rev-parse HEAD)" >> {builds}
"""


@dataclass
class Case:
    """One planted question: where, the scripts, and the right answers."""

    family: str
    cell: str                      # the family's parameters, as the table groups them
    seed: int
    repo: Path
    old: str
    new: str
    planted: str | None            # the commit that made the change; None: nothing changed
    nameable: bool = True          # False: untestable commits around it hide which one
    also_right: frozenset[str] = frozenset()   # other commits a right `found` may name
    q: float = 1.0                 # how often the failing side shows its failure
    eps: float = 0.0               # how often the passing side fails unrelatedly
    extra: list[str] = field(default_factory=list)   # more bisect-ngc options

    @property
    def dir(self) -> Path:
        return self.repo.parent

    @property
    def test(self) -> str:
        return f"sh {shlex.quote(str(self.dir / 'test.sh'))}"

    @property
    def build(self) -> str:
        return f"sh {shlex.quote(str(self.dir / 'build.sh'))}"

    def counts(self, who: str) -> tuple[int, int]:
        """(test runs, distinct commits built) that `who` ("tool" or "git") paid."""
        runs = self.dir / f"runs-{who}"
        builds = self.dir / f"builds-{who}"
        return (len(runs.read_text().split()) if runs.exists() else 0,
                len(set(builds.read_text().split())) if builds.exists() else 0)

    def scripts_for(self, who: str) -> None:
        """Point the scripts' counters at `who`'s files (each side counts its own runs)."""
        runs, builds = self.dir / f"runs-{who}", self.dir / f"builds-{who}"
        runs.touch()
        verdict = DETERMINISTIC if self.q >= 1 and self.eps <= 0 else FLAKY.format(
            runs=shlex.quote(str(runs)), seed=f"{self.seed}-{who}", q=self.q, eps=self.eps)
        (self.dir / "test.sh").write_text(TEST.format(runs=shlex.quote(str(runs)),
                                                      verdict=verdict))
        (self.dir / "build.sh").write_text(BUILD.format(builds=shlex.quote(str(builds))))


class Dag:
    """A history written with `git fast-import`: commits with their files, on branches,
    merges with several parents; `finish` returns each mark's sha."""

    def __init__(self, path: Path):
        self.path = path
        self.stream = bytearray()
        self.mark = 0
        self.files: dict[int, dict[str, str]] = {}
        self.clock = 1_700_000_000

    def commit(self, branch: str, message: str, parents: list[int], files: dict[str, str | None]
               ) -> int:
        """A commit on `branch` whose tree is its first parent's with `files` changed
        (None: removed)."""
        self.mark += 1
        self.clock += 60
        tree = dict(self.files[parents[0]]) if parents else {}
        for name, text in files.items():
            if text is None:
                tree.pop(name, None)
            else:
                tree[name] = text
        self.files[self.mark] = tree
        out = self.stream
        out += b"commit refs/heads/%s\nmark :%d\n" % (branch.encode(), self.mark)
        for who in (b"author", b"committer"):
            out += b"%s Dev <dev@example.com> %d +0000\n" % (who, self.clock)
        out += _data(message)
        if parents:
            out += b"from :%d\n" % parents[0]
        for p in parents[1:]:
            out += b"merge :%d\n" % p
        out += b"deleteall\n"
        for name, text in sorted(tree.items()):
            out += b"M 644 inline %s\n" % name.encode() + _data(text)
        return self.mark

    def finish(self) -> dict[int, str]:
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", "-b", "main", str(self.path)], check=True)
        marks = self.path / ".git" / "marks"
        subprocess.run(["git", "fast-import", "--quiet", f"--export-marks={marks}"],
                       cwd=self.path, input=bytes(self.stream), check=True)
        subprocess.run(["git", "reset", "-q", "--hard", "main"], cwd=self.path, check=True)
        return {int(m[1:]): sha for m, sha in (line.split() for line in
                                              marks.read_text().splitlines())}


def _data(text: str) -> bytes:
    raw = text.encode()
    return b"data %d\n" % len(raw) + raw + b"\n"


def linear(root: Path, seed: int, n: int, transition: int | None,
           untestable: range = range(0), q: float = 1.0, eps: float = 0.0,
           family: str = "linear", cell: str = "") -> Case:
    """n first-parent commits; commit i >= transition behaves new (None: none does);
    the commits of `untestable` cannot be tested."""
    dag = Dag(root / "repo")
    marks = []
    for i in range(n):
        new = transition is not None and i >= transition
        marks.append(dag.commit("main", f"change {i}", marks[-1:], {
            "behaviour": "new\n" if new else "old\n", "version.txt": f"{i}\n",
            "broken": "x\n" if i in untestable else None}))
    by_mark = dag.finish()
    shas = [by_mark[m] for m in marks]
    planted = shas[transition] if transition is not None else None
    # untestable commits at or just before the change hide which commit made it
    hidden = transition is not None and (transition in untestable or
                                         transition - 1 in untestable)
    return Case(family, cell, seed, root / "repo", shas[0], shas[-1], planted,
                nameable=not hidden, q=q, eps=eps)


def flaky(root: Path, seed: int, n: int, transition: int, q: float, eps: float) -> Case:
    return linear(root, seed, n, transition, q=q, eps=eps, family="intermittent",
                  cell=f"q={q:g} eps={eps:g}")


def null(root: Path, seed: int, n: int, side: str, q: float = 1.0, eps: float = 0.0) -> Case:
    """No change: every commit behaves as `side` ("old" or "new")."""
    case = linear(root, seed, n, 0 if side == "new" else None, q=q, eps=eps, family="null",
                  cell=f"all {side}" + ("" if q >= 1 and eps <= 0 else ", flaky"))
    case.planted = None
    return case


def linear_cases(root: Path, rng: random.Random, count: int, sizes: tuple[int, ...]
                 ) -> list[Case]:
    """Deterministic linear histories of the given sizes, with an untestable stretch
    away from the answer, next to it, around it, or none."""
    cases = []
    for k in range(count):
        n = sizes[k % len(sizes)]
        t = rng.randint(2, n - 2)
        where = ("none", "away", "next", "around")[k % 4]
        length = rng.randint(1, max(1, min(12, n // 8)))
        stretch = {"none": range(0),
                   "away": _away(rng, n, t, length),
                   "next": range(max(1, t - length), t),
                   "around": range(max(1, t - length // 2), min(n - 1, t + length // 2 + 1))}[where]
        cases.append(linear(root / f"linear-{k}", rng.randrange(1 << 30), n, t, stretch,
                            cell=f"n={n} stretch {where}"))
    return cases


def _away(rng: random.Random, n: int, t: int, length: int) -> range:
    """A stretch at least two commits clear of the answer and its parent."""
    spots = [s for s in range(1, n - length) if s + length < t - 2 or s > t + 2]
    start = rng.choice(spots) if spots else 1
    return range(start, start + length) if spots else range(0)
