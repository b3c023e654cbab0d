"""Histories with merges, each with its answer planted (tests/lib/histories.py says how the
files decide a commit's behaviour). The shapes of the merges issue:

- pr: a pull request merged into main, the change on its branch;
- nested: main <- maintenance branch <- pull request, the change on the PR;
- sync: a branch that merged main in (a feature the test needs) before the change;
- release: --old is a release tag on a branch that fixed a bug main still had, merged
  back later; the change comes after, on main;
- crisscross: two branches that merged each other, the change on one of them;
- cherrypick: the branch cherry-picked what the test needs, and the merge breaks on its
  own (both parents pass): the merge is the answer;
- breaks: a merge that breaks while both parents pass: the merge is the answer;
- octopus: one merge of three branches, the change on one of them;
- deep: main <- maintenance <- feature <- pull request, the change on the PR (three
  levels of merges).
"""
from __future__ import annotations

import random
from pathlib import Path

from .histories import Case, Dag

SHAPES = ("pr", "nested", "sync", "release", "crisscross", "cherrypick", "breaks",
          "octopus", "deep")
OLD, NEW = {"behaviour": "old\n"}, {"behaviour": "new\n"}


def _n(rng: random.Random, lo: int, hi: int) -> int:
    return rng.randint(lo, hi)


def _run(dag: Dag, branch: str, parent: int, count: int, tag: str,
         files: dict[str, str | None] | None = None) -> list[int]:
    marks = [parent]
    for k in range(count):
        marks.append(dag.commit(branch, f"{tag} {k}", [marks[-1]],
                                {f"{tag}.txt": f"{k}\n", **(files if k == 0 and files else {})}))
    return marks[1:]


def _branch(dag: Dag, rng: random.Random, name: str, fork: int, lo: int, hi: int
            ) -> tuple[list[int], int]:
    """A branch of `name` commits from `fork`, one of them (returned) the change."""
    k = _n(rng, lo, hi)
    c = rng.randrange(k)
    marks = [fork]
    for i in range(k):
        marks.append(dag.commit(name, f"{name} {i}", [marks[-1]],
                                {f"{name}.txt": f"{i}\n", **(NEW if i == c else {})}))
    return marks[1:], marks[1 + c]


def merge_case(root: Path, rng: random.Random, shape: str, seed: int) -> Case:
    dag = Dag(root / "repo")
    base = dag.commit("main", "root", [], {**OLD, "version.txt": "0\n"})
    truth_mark, also = _SHAPES[shape](dag, rng, base)
    shas = dag.finish()
    old_mark, new_mark = dag.old, dag.new  # type: ignore[attr-defined]
    return Case("merges", shape, seed, root / "repo", shas[old_mark], shas[new_mark],
                shas[truth_mark], also_right=frozenset(shas[m] for m in also))


def _pr(dag: Dag, rng: random.Random, base: int) -> tuple[int, list[int]]:
    main = _run(dag, "main", base, _n(rng, 2, 6), "main")
    fork = rng.choice([base] + main[:-1])
    k = _n(rng, 2, 8)
    c = rng.randrange(k)
    branch = [fork]
    for i in range(k):
        branch.append(dag.commit("pr", f"pr {i}", [branch[-1]],
                                 {"pr.txt": f"{i}\n", **(NEW if i == c else {})}))
    merge = dag.commit("main", "Merge pull request #1 from dev/pr", [main[-1], branch[-1]],
                       {"pr.txt": f"{k - 1}\n", **NEW})
    after = _run(dag, "main", merge, _n(rng, 1, 5), "after")
    dag.old, dag.new = base, after[-1]  # type: ignore[attr-defined]
    return branch[1 + c], []


def _nested(dag: Dag, rng: random.Random, base: int) -> tuple[int, list[int]]:
    main = _run(dag, "main", base, _n(rng, 2, 5), "main")
    maint = _run(dag, "maint", main[0], _n(rng, 1, 4), "maint")
    k = _n(rng, 2, 6)
    c = rng.randrange(k)
    pr = [maint[-1]]
    for i in range(k):
        pr.append(dag.commit("pr", f"pr {i}", [pr[-1]],
                             {"pr.txt": f"{i}\n", **(NEW if i == c else {})}))
    inner = dag.commit("maint", "Merge pull request #2 from dev/pr", [maint[-1], pr[-1]],
                       {"pr.txt": f"{k - 1}\n", **NEW})
    more = _run(dag, "maint", inner, _n(rng, 0, 3), "maint2")
    tip = more[-1] if more else inner
    outer = dag.commit("main", "Merge branch maint", [main[-1], tip],
                       {**dag.files[tip], **{"main.txt": dag.files[main[-1]]["main.txt"]}})
    after = _run(dag, "main", outer, _n(rng, 1, 4), "after")
    dag.old, dag.new = base, after[-1]  # type: ignore[attr-defined]
    return pr[1 + c], []


def _sync(dag: Dag, rng: random.Random, base: int) -> tuple[int, list[int]]:
    """main: m0 (the test needs `feature`, absent) -> m1 adds it -> m2 = --old; the branch
    forks at m0, merges m1, then has the change."""
    m0 = dag.commit("main", "the test needs a feature", [base], {"needs": "1\n"})
    m1 = dag.commit("main", "add the feature", [m0], {"feature": "1\n"})
    m2 = dag.commit("main", "main goes on", [m1], {"main.txt": "2\n"})
    early = _run(dag, "topic", m0, _n(rng, 1, 4), "early")
    synced = dag.commit("topic", "Merge branch main into topic", [early[-1], m1],
                        {"feature": "1\n"})
    k = _n(rng, 2, 6)
    c = rng.randrange(k)
    late = [synced]
    for i in range(k):
        late.append(dag.commit("topic", f"late {i}", [late[-1]],
                               {"late.txt": f"{i}\n", **(NEW if i == c else {})}))
    merge = dag.commit("main", "Merge branch topic", [m2, late[-1]],
                       {**dag.files[late[-1]], "main.txt": "2\n"})
    after = _run(dag, "main", merge, _n(rng, 1, 3), "after")
    dag.old, dag.new = m2, after[-1]  # type: ignore[attr-defined]
    return late[1 + c], []


def _release(dag: Dag, rng: random.Random, base: int) -> tuple[int, list[int]]:
    """main has a bug from m0; the release branch fixes it (--old, the tag); main merges
    the release back later; the change comes on main after that."""
    m0 = dag.commit("main", "a bug", [base], {"bug": "1\n"})
    before = _run(dag, "main", m0, _n(rng, 2, 6), "main")
    fix = dag.commit("release", "fix the bug", [m0], {"bug": None})
    rel = _run(dag, "release", fix, _n(rng, 0, 2), "release")
    back = dag.commit("main", "Merge branch release", [before[-1], (rel or [fix])[-1]],
                      {"bug": None, **{f: t for f, t in dag.files[(rel or [fix])[-1]].items()
                                       if f.startswith("release")}})
    k = _n(rng, 2, 6)
    c = rng.randrange(k)
    later = [back]
    for i in range(k):
        later.append(dag.commit("main", f"later {i}", [later[-1]],
                                {"later.txt": f"{i}\n", **(NEW if i == c else {})}))
    dag.old, dag.new = (rel or [fix])[-1], later[-1]  # type: ignore[attr-defined]
    return later[1 + c], []


def _crisscross(dag: Dag, rng: random.Random, base: int) -> tuple[int, list[int]]:
    a = _run(dag, "a", base, _n(rng, 2, 4), "a")
    b = _run(dag, "b", base, _n(rng, 2, 4), "b")
    a2 = dag.commit("a", "Merge branch b into a", [a[-1], b[0]],
                    {"b.txt": dag.files[b[0]]["b.txt"]})
    b2 = dag.commit("b", "Merge branch a into b", [b[-1], a[0]],
                    {"a.txt": dag.files[a[0]]["a.txt"]})
    k = _n(rng, 2, 5)
    c = rng.randrange(k)
    more = [b2]
    for i in range(k):
        more.append(dag.commit("b", f"b late {i}", [more[-1]],
                               {"late.txt": f"{i}\n", **(NEW if i == c else {})}))
    merge = dag.commit("main", "Merge branch b into a", [a2, more[-1]],
                       {**dag.files[more[-1]], "a.txt": dag.files[a2]["a.txt"]})
    after = _run(dag, "main", merge, _n(rng, 1, 3), "after")
    dag.old, dag.new = base, after[-1]  # type: ignore[attr-defined]
    return more[1 + c], []


def _cherrypick(dag: Dag, rng: random.Random, base: int) -> tuple[int, list[int]]:
    """main: m0 needs a fix (the test fails without it), m1 adds it, m2 = --old; the branch
    forks at m0 and cherry-picks the fix, and the merge breaks (combo_a meets combo_b)."""
    m0 = dag.commit("main", "the test needs a fix", [base], {"needs": "1\n"})
    m1 = dag.commit("main", "the fix", [m0], {"feature": "1\n", "combo_a": "1\n"})
    m2 = dag.commit("main", "main goes on", [m1], {"main.txt": "2\n"})
    topic = _run(dag, "topic", m0, _n(rng, 1, 3), "topic")
    pick = dag.commit("topic", "the fix (cherry picked)", [topic[-1]], {"feature": "1\n"})
    tail = _run(dag, "topic", pick, _n(rng, 1, 3), "tail", {"combo_b": "1\n"})
    merge = dag.commit("main", "Merge branch topic", [m2, tail[-1]],
                       {**dag.files[tail[-1]], "combo_a": "1\n", "main.txt": "2\n"})
    after = _run(dag, "main", merge, _n(rng, 1, 3), "after")
    dag.old, dag.new = m2, after[-1]  # type: ignore[attr-defined]
    return merge, []


def _breaks(dag: Dag, rng: random.Random, base: int) -> tuple[int, list[int]]:
    main = _run(dag, "main", base, _n(rng, 2, 5), "main", {"combo_a": "1\n"})
    fork = base
    topic = _run(dag, "topic", fork, _n(rng, 2, 5), "topic", {"combo_b": "1\n"})
    merge = dag.commit("main", "Merge branch topic", [main[-1], topic[-1]],
                       {**{f: t for f, t in dag.files[topic[-1]].items()
                           if f.startswith(("topic", "combo"))}})
    after = _run(dag, "main", merge, _n(rng, 1, 4), "after")
    dag.old, dag.new = base, after[-1]  # type: ignore[attr-defined]
    return merge, []


def _octopus(dag: Dag, rng: random.Random, base: int) -> tuple[int, list[int]]:
    main = _run(dag, "main", base, _n(rng, 1, 3), "main")
    which, tips, truth = rng.randrange(3), [], 0
    for b in range(3):
        k = _n(rng, 1, 4)
        c = rng.randrange(k)
        marks = [base]
        for i in range(k):
            marks.append(dag.commit(f"b{b}", f"b{b} {i}", [marks[-1]],
                                    {f"b{b}.txt": f"{i}\n", **(NEW if b == which and i == c
                                                               else {})}))
        tips.append(marks[-1])
        truth = marks[1 + c] if b == which else truth
    files = {f: t for tip in tips for f, t in dag.files[tip].items() if f.startswith("b")}
    merge = dag.commit("main", "Merge branches b0, b1 and b2", [main[-1], *tips],
                       {**files, **(NEW)})
    after = _run(dag, "main", merge, _n(rng, 1, 3), "after")
    dag.old, dag.new = base, after[-1]  # type: ignore[attr-defined]
    return truth, []


def _deep(dag: Dag, rng: random.Random, base: int) -> tuple[int, list[int]]:
    """Three levels: main <- maint <- feature <- pr; the change on the PR."""
    main = _run(dag, "main", base, _n(rng, 1, 3), "main")
    maint = _run(dag, "maint", main[0], _n(rng, 1, 3), "maint")
    feature = _run(dag, "feature", maint[0], _n(rng, 1, 3), "feature")
    pr, truth = _branch(dag, rng, "pr", feature[-1], 2, 5)
    top = pr[-1]
    for branch, into in (("feature", feature[-1]), ("maint", maint[-1]), ("main", main[-1])):
        top = dag.commit(branch, f"Merge {top} into {branch}", [into, top],
                         {**dag.files[top], **{f: t for f, t in dag.files[into].items()
                                               if f.startswith(branch)}})
    after = _run(dag, "main", top, _n(rng, 1, 3), "after")
    dag.old, dag.new = base, after[-1]  # type: ignore[attr-defined]
    return truth, []


_SHAPES = {"pr": _pr, "nested": _nested, "sync": _sync, "release": _release,
           "crisscross": _crisscross, "cherrypick": _cherrypick, "breaks": _breaks,
           "octopus": _octopus, "deep": _deep}
