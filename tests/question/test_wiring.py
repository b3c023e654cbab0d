"""One wiring: the same options give the same Recipe and keys whichever backend runs it,
and the session record survives a round trip through the store."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict

import pytest

from tests.lib.repos import BUILD, TEST, make_repo
from bisect_ngc.errors import UserError
from bisect_ngc.core.inputs import Settings
from bisect_ngc.question.options import Options
from bisect_ngc.question.rules import check
from bisect_ngc.question.wiring import ask
from bisect_ngc.core.search import Verdict
from bisect_ngc.core.keys import CacheKey
from bisect_ngc.core.records import ProbeRecord, SessionParams, SessionResult, SessionStatus
from bisect_ngc.core.store import Store


@pytest.fixture
def repo(tmp_path):
    make_repo(tmp_path / "r", 12, 6)
    return tmp_path / "r"


def options(tmp_path, repo, backend, **kw):
    return Options(cache_dir=tmp_path / "cache", state=tmp_path / "st", repo=str(repo),
                   old="main~11", new="main", build=BUILD, test=TEST, backend=backend,
                   image="debian:bookworm", timeout=30, slurm={"partition": "cpu"}, **kw)


def test_the_same_options_give_the_same_recipe_on_every_backend(tmp_path, repo):
    asked = {b: ask(options(tmp_path, repo, b), print) for b in ("local", "docker", "slurm")}
    recipes = {b: q.recipe for b, q in asked.items()}
    assert recipes["local"] == recipes["docker"] == recipes["slurm"]
    keys = {(r.build_key(), r.test_key()) for r in recipes.values()}
    assert len(keys) == 1
    assert {b: q.backend.name for b, q in asked.items()} == \
        {"local": "local", "docker": "docker", "slurm": "slurm"}
    # and the keys change with what decides a build or a verdict
    other = ask(options(tmp_path, repo, "local", max_jobs=None), print).recipe
    other.build = "make"
    assert other.build_key() != recipes["local"].build_key()
    assert other.test_key() == recipes["local"].test_key()


@pytest.mark.slow
def test_a_headless_local_bisection_loads_no_docker_sdk_rich_or_urllib(tmp_path, repo):
    """Start-up is a good part of a probe's overhead: a run loads only what it uses."""
    import subprocess
    import sys
    code = ("import sys; from bisect_ngc.cli.main import main; "
            f"rc = main(['bisect', '--repo', {str(repo)!r}, '--old', 'main~11', '--new', 'main', "
            "'--test', 'test $(cat behaviour) = old', '--quiet', "
            f"'--state', {str(tmp_path / 's')!r}, '--cache-dir', {str(tmp_path / 'c')!r}]); "
            "print(rc, [m for m in ('docker', 'rich', 'urllib.request') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip().splitlines()[-1] == "0 []", out.stderr


@pytest.mark.parametrize("field,value", [("image", "img\nRUN evil"), ("repro_args", "a\nb")])
def test_values_rendered_into_scripts_must_be_one_line(tmp_path, repo, field, value):
    opts = options(tmp_path, repo, "docker", **{"repro_args": ""} if field != "repro_args"
                   else {})
    with pytest.raises(UserError, match="must be one line"):
        check(dataclasses.replace(opts, **{field: value}))


def test_slurm_values_must_be_one_line(tmp_path, repo):
    opts = options(tmp_path, repo, "slurm")
    slurm = {"time": "1:00\n#SBATCH --exclusive", "sbatch_args": []}
    with pytest.raises(UserError, match="--time must be one line"):
        check(dataclasses.replace(opts, slurm=slurm))


def test_a_session_round_trips_through_the_store(tmp_path):
    store = Store(tmp_path / "st")
    params = SessionParams(key="k", identity={"repo": "r"}, jobs=3, repeat=2, policy="majority",
                           backend={"backend": "local"}, recipe={"test": "t"},
                           labels={"old": "24.09"}, origin="https://github.com/a/b.git",
                           subject="The weak-ref capture failure", probe_argv=["x", "y"])
    store.create_session("k-1", params, ["a" * 40, "b" * 40])
    result = SessionResult(status="found", first_new="b" * 40, last_old="a" * 40,
                           candidates=["b" * 40], old_outcome="pass", new_outcome="fail",
                           n_candidates=1, ships=[{"release": "24.10", "contains": "yes"}])
    store.set_status("k-1", SessionStatus.FOUND, result)
    probe = ProbeRecord(round=1, idx=1, commit="b" * 40, verdict=Verdict.FAIL, runs=["fail"],
                        logs={"test-1": "logs/x"}, details={"checkout_s": 0.5})
    store.add_probe("k-1", probe)
    key = CacheKey("r", "b" * 40, "build", "test", "env")
    store.cache_put(key, probe)
    store.close()

    again = Store(tmp_path / "st", readonly=True)
    rec = again.session("k-1")
    assert rec.params == params and rec.result == result and rec.status is SessionStatus.FOUND
    assert again.probes("k-1") == [probe]
    hit = again.cache_get(key)
    assert hit.verdict is Verdict.FAIL and hit.cached and hit.details == {"checkout_s": 0.5}
    assert json.loads(json.dumps(asdict(rec.params))) == asdict(params)


def test_slurm_jobs_of_an_earlier_version_are_adopted(tmp_path):
    """A state written before the typed job table: its Slurm jobs still re-attach."""
    import json
    import sqlite3
    root = tmp_path / "st"
    root.mkdir()
    db = sqlite3.connect(root / "state.db")
    db.execute("CREATE TABLE jobs (session TEXT NOT NULL, name TEXT NOT NULL, "
               "value TEXT NOT NULL, PRIMARY KEY (session, name))")
    db.execute("INSERT INTO jobs VALUES (?,?,?)", ("s-1", "probe:abc#2", json.dumps(
        {"round": "r1", "task": 3, "build_job": "10", "test_job": "11", "attempt": 1,
         "expect": "", "submitted": 5.0, "cancelled_by_us": True, "old_field": 1})))
    db.commit()
    db.close()
    store = Store(root)
    job = store.slurm_jobs("s-1")["abc#2"]
    assert (job.round, job.task, job.build_job, job.test_job, job.attempt) == \
        ("r1", 3, "10", "11", 1) and job.cancelled_by_us is True
    assert store.db.execute("SELECT name FROM sqlite_master WHERE name='jobs'").fetchone() \
        is None
    assert Store(root).slurm_jobs("s-1")["abc#2"] == job          # opened again: the same


def test_companions_change_the_test_key_and_keep_release_mode_off_swaps(tmp_path, monkeypatch):
    """--with is part of what decides a verdict; and with companions, release mode does
    not swap PyTorch between images, which would run them without the companions."""
    from bisect_ngc.core.inputs import Tier
    from tests.lib.repos import catalog
    shas = make_repo(tmp_path / "pytorch", 12, 6)
    comp = make_repo(tmp_path / "comp", 3, 1)
    monkeypatch.setenv("BISECT_NGC_CATALOG",
                       str(catalog(tmp_path, [("90.01", shas[1]), ("90.02", shas[9])])))

    def asked(*with_):
        return ask(Options(cache_dir=tmp_path / "cache", state=tmp_path / "st",
                           from_="90.01", to="90.02", torch_repo=str(tmp_path / "pytorch"),
                           backend="docker", slurm={}, with_=with_), print)
    plain, withc = asked(), asked(f"git+{tmp_path / 'comp'}@main")
    assert withc.recipe.companions[0].commit == comp[-1]
    assert plain.recipe.test_key() != withc.recipe.test_key()
    assert plain.recipe.build_key() == withc.recipe.build_key()    # torch builds are shared
    images = [Tier("image", {})]
    assert plain.swaps(images, Settings()) is not None and withc.swaps(images, Settings()) is None


def test_any_other_repository_loads_no_catalog_and_builds_no_image_rule(tmp_path, repo,
                                                                         monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError("the NGC catalog was loaded for a plain repository")
    monkeypatch.setattr("bisect_ngc.images.releases.Catalog.load", refused)
    q = ask(options(tmp_path, repo, "local"), print)
    bis = q.bisection(Settings())
    assert q.catalog is None and bis.images is None and q.ships(bis.span.new) == []
