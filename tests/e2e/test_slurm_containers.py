"""Slurm with real containers: enroot and pyxis, built from source by
scripts/enroot-pyxis-up.sh, on the single-node cluster of scripts/slurm-up.sh, with the
test image imported from the local Docker engine (scripts/docker-up.sh). Skipped, with the
reason, where any of the three is missing. GPU hooks (libnvidia-container) cannot run
here: these jobs ask for no GPU inside the container.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bisect_ngc.core.search import ceil_log
from bisect_ngc.core.store import Store

from tests.lib.repos import make_repo
from tests.lib.companion_repos import repos as repos_fixture
from tests.lib.slurm_cluster import (PROBLEM as SLURM_PROBLEM, kill_after_two_rounds_and_rerun,
                                      my_jobs, submitted_tests)

IMAGE = os.environ.get("BISECT_NGC_TEST_IMAGE", "bisect-ngc-test/debian-build:bookworm-git")
MARKER = "/etc/bisect-ngc-test-image"      # exists in the test image only


def _problem() -> str | None:
    if SLURM_PROBLEM:
        return SLURM_PROBLEM
    if shutil.which("enroot") is None:
        return "enroot is not installed; run scripts/enroot-pyxis-up.sh SRC_DIR"
    if "--container-image" not in subprocess.run(["srun", "--help"], capture_output=True,
                                                 text=True).stdout:
        return "pyxis is not registered with Slurm; run scripts/enroot-pyxis-up.sh SRC_DIR"
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode:
        return f"test image {IMAGE} is missing; run scripts/docker-up.sh"
    if os.path.exists(MARKER):
        return f"{MARKER} exists on this host: it could not tell a container from the host"
    return None


PROBLEM = _problem()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")]

# Both fail outside the image: a probe that did not run in the container cannot pass.
BUILD = f'cat {MARKER} && cp behaviour "$BISECT_ARTIFACTS/out"'
TEST = (f'cat {MARKER} || exit 125; test "$(cat "$BISECT_ARTIFACTS/out")" = old')


def args(repo, tmp, runtime, *extra, test=TEST):
    n = len(subprocess.run(["git", "rev-list", "--first-parent", "main"], cwd=repo,
                           capture_output=True, text=True).stdout.split())
    return ["bisect", "--repo", str(repo), "--old", f"main~{n - 1}", "--new", "main",
            "--build", BUILD, "--test", test, "--backend", "slurm", "--partition", "cpu",
            "--gpu-partition", "gpu", "--gpus-per-probe", "0", "--container-runtime", runtime,
            "--container-import", "dockerd", "--image", IMAGE, "--state", str(tmp / "st"),
            "--quiet", *extra]


def enroot_containers() -> list[str]:
    out = subprocess.run(["enroot", "list"], capture_output=True, text=True).stdout.split()
    return [c for c in out if c.startswith(("bisect-ngc-", "pyxis_"))]


def round_outputs(tmp: Path, session: str) -> str:
    rounds = tmp / "st" / "slurm" / "rounds" / session
    return "".join(p.read_text(errors="replace") for p in sorted(rounds.rglob("*.out")))


@pytest.mark.parametrize("runtime", ["pyxis", "enroot"])
def test_bisects_inside_the_image_with_one_import(tmp_path, run_cli, runtime):
    n = 60
    shas = make_repo(tmp_path / "r", n, 41)
    code, out, err = run_cli(args(tmp_path / "r", tmp_path, runtime, "--json", "--jobs", "4"))
    assert code == 0, err
    res = json.loads(out)
    assert res["first_new"] == shas[41]
    assert res["rounds"] <= 1 + ceil_log(n - 1, 5) + 1
    store = Store(tmp_path / "st")
    probes = store.probes(res["session"])
    # Every build and every test read the file that only the image has.
    for p in probes:
        for name, rel in p.logs.items():
            assert "bisect-ngc test image" in (store.root / rel).read_text(), (p.commit, name)
    # The first round's tasks raced for the image: one imported it, the others waited.
    text = round_outputs(tmp_path, res["session"])
    assert text.count("bisect-ngc: importing dockerd://") == 1
    sqsh = list((tmp_path / "st" / "slurm" / "enroot").glob("*.sqsh"))
    assert len(sqsh) == 1 and "@" in sqsh[0].name
    rec = store.session(res["session"])
    assert rec.params.backend["image_squashfs"] == str(sqsh[0])
    assert rec.params.backend["image_digest"].startswith("sha256:")
    assert not my_jobs(res["session"]) and not leftovers()
    # Another question on the same state: the squashfs is reused, not imported again.
    argv = args(tmp_path / "r", tmp_path, runtime, "--json", "--jobs", "2")
    argv[argv.index("--old") + 1] = "main~30"
    code, out, _ = run_cli(argv)
    again = json.loads(out)
    assert code == 0 and again["first_new"] == shas[41]
    assert "importing" not in round_outputs(tmp_path, again["session"])
    assert sqsh[0].name in Path(again["report"]).read_text()


def leftovers() -> list[str]:
    """enroot containers, and the FUSE mounts and processes of a start straight from a
    squashfs. Zombies are not counted: they hold nothing, and where PID 1 is not an init
    (as on CI) nobody may reap them."""
    ps = subprocess.run(["ps", "-eo", "stat=,args="], capture_output=True, text=True).stdout
    fuse = [line for line in ps.splitlines() if re.search(r"squashfuse|fuse-overlayfs", line)
            and not line.lstrip().startswith("Z")]
    mounts = [line for line in Path("/proc/mounts").read_text().splitlines()
              if re.search(r"squashfuse|fuse-overlayfs", line)]
    return enroot_containers() + fuse + mounts


@pytest.mark.parametrize("runtime", ["pyxis", "enroot", "enroot-unpack"])
def test_ctrl_c_leaves_no_container_behind(tmp_path, runtime):
    """enroot-unpack: enroot with a container of each task's own (where a node has no
    squashfuse), which the task must remove however it ends."""
    make_repo(tmp_path / "r", 30, 17)
    slow = f"cat {MARKER} && sleep 60; " + TEST
    argv = [sys.executable, "-m", "bisect_ngc", *args(tmp_path / "r", tmp_path,
                                                      runtime.split("-")[0], "--jobs", "2",
                                                      test=slow)]
    env = dict(os.environ, BISECT_NGC_ENROOT_UNPACK="1" if runtime.endswith("unpack") else "")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    end = time.monotonic() + 120
    rounds = tmp_path / "st" / "slurm" / "rounds"

    def testing() -> bool:     # a test is running inside its container
        return any("bisect-ngc test image" in p.read_text(errors="replace")
                   for p in rounds.rglob("test-*.log"))

    while not testing():
        assert time.monotonic() < end and proc.poll() is None, "no test started"
        time.sleep(0.2)
    assert leftovers(), "a running test shows no container or FUSE mount"
    if runtime == "enroot-unpack":
        assert enroot_containers(), "no container of the task's own"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    assert proc.returncode == 130
    session = Store(tmp_path / "st").latest().id
    end = time.monotonic() + 60
    while my_jobs(session) or leftovers():
        assert time.monotonic() < end, (my_jobs(session), leftovers())
        time.sleep(0.5)


def test_a_killed_controller_reattaches_without_duplicate_submissions(tmp_path):
    shas = make_repo(tmp_path / "r", 80, 51)
    argv = [sys.executable, "-m", "bisect_ngc", *args(tmp_path / "r", tmp_path, "enroot",
                                                      "--json", "--jobs", "3",
                                                      test="sleep 2; " + TEST)]
    again = kill_after_two_rounds_and_rerun(argv, tmp_path / "st", wait=120)
    assert again.returncode == 0, again.stderr
    res = json.loads(again.stdout)
    assert res["first_new"] == shas[51] and "re-attaching" in again.stderr
    counts = submitted_tests(tmp_path, res["session"])
    assert counts and all(v == 1 for v in counts.values()), counts
    assert not my_jobs(res["session"]) and not leftovers()


def test_a_missing_local_image_is_a_clear_error(tmp_path, run_cli):
    make_repo(tmp_path / "r", 6, 3)
    argv = args(tmp_path / "r", tmp_path, "enroot")
    argv[argv.index(IMAGE)] = "bisect-ngc-test/no-such-image:1"
    code, _, err = run_cli(argv)
    assert code == 2 and "cannot give bisect-ngc-test/no-such-image:1" in err
    assert "docker pull" in err


@pytest.mark.parametrize("runtime", ["pyxis", "enroot"])
def test_release_mode_names_the_component_with_swap_jobs(tmp_path, run_cli, monkeypatch,
                                                         runtime):
    """Case A of issue 21 on the cluster: two release images that differ outside PyTorch
    (the generated pair of tests/e2e/test_components.py, imported by enroot from the local
    engine). The image probes, the PyTorch swap and attribution's swaps are test-only jobs
    that run in the squashfs; no commit is named and nothing is built."""
    import math
    from tests.lib.component_images import build_image
    from tests.lib.docker_engine import docker_client
    from tests.lib.repos import catalog
    shas = make_repo(tmp_path / "pytorch", 30, 29)
    monkeypatch.setenv("BISECT_NGC_CATALOG",
                       str(catalog(tmp_path, [("91.01", shas[5]), ("91.02", shas[20])])))
    for side, name in (("a", "91.01"), ("b", "91.02")):
        build_image(side, tmp_path)
        docker_client().images.get(f"bisect-ngc-test/components:{side}").tag(
            f"nvcr.io/nvidia/pytorch:{name}-py3")
    try:
        code, out, err = run_cli([
            "bisect", "--from", "91.01", "--to", "91.02", "--torch-repo", tmp_path / "pytorch",
            "--backend", "slurm", "--partition", "cpu", "--gpu-partition", "gpu",
            "--gpus-per-probe", "0", "--container-runtime", runtime,
            "--container-import", "dockerd", "--build", 'cp behaviour "$BISECT_ARTIFACTS/out"',
            "--test", f'cat {MARKER} >/dev/null || exit 125; test "$DEMO_MODE" = old',
            "--no-nightlies", "--state", tmp_path / "st", "--cache-dir", tmp_path / "cache",
            "--quiet", "--json"])
    finally:
        for name in ("91.01", "91.02"):
            docker_client().images.remove(f"nvcr.io/nvidia/pytorch:{name}-py3", force=True)
    assert code == 5, err
    res = json.loads(out)
    assert res["status"] == "not-in-commits" and res["first_new"] is None and res["builds"] == 0
    found = res["components"]
    assert found["status"] == "found" and found["culprits"] == ["env:DEMO_MODE"], found
    n = len(found["components"]) - len(found["unswappable"])
    assert len(found["swaps"]) <= 2 * math.ceil(math.log2(n)) + 2
    # The swaps ran on the cluster, from files extracted into the shared directory.
    shared = tmp_path / "st" / "slurm"
    assert list((shared / "components" / "extract").glob("*/.done.json"))
    assert not list((shared / "swap-jobs").iterdir()), "a swap job kept its directory"
    assert "## Which part of the container" in Path(res["report"]).read_text()
    assert not leftovers()


repos = repos_fixture          # the generated torch stand-in and companion, a fixture


def test_companions_are_built_as_build_jobs_into_the_shared_store(tmp_path, run_cli, repos):
    """--with on the cluster (issue 23): the generated torch stand-in and companion of
    tests/e2e/test_companion_builds.py; the companion is built by the build array against each
    probed torch, in the image, into the shared store; a second question reuses both."""
    from tests.lib.companion_repos import BROKEN, BUILD, NEW_FROM, TEST as CTEST, WITH_BUILD
    torch, shas, comp = repos

    def argv(test, *extra):
        return ["--repo", torch, "--build", BUILD, "--test", test,
                "--with", f"git+{comp}@v1.0{WITH_BUILD}", "--backend", "slurm",
                "--partition", "cpu", "--gpu-partition", "gpu", "--gpus-per-probe", "0",
                "--container-runtime", "pyxis", "--container-import", "dockerd",
                "--image", IMAGE, "--state", tmp_path / "st", "--cache-dir", tmp_path / "cache",
                *extra]
    span = ["--old", shas[0], "--new", shas[-1]]
    code, out, err = run_cli(["bisect", *span, *argv(CTEST, "--quiet", "--json", "--jobs", "3")])
    res = json.loads(out)
    assert code == 0 and res["first_new"] == shas[NEW_FROM], (res, err)
    store = tmp_path / "st" / "slurm" / "artifacts"
    built = [json.loads(p.read_text()) for p in store.glob("*/meta.json")]
    companions = [m for m in built if "companion" in m]
    tested = {p.commit for p in Store(tmp_path / "st").probes(res["session"])
              if p.verdict in ("pass", "fail")}
    assert len(companions) == len(tested) > 2       # one per probed torch, run again or not
    assert not list((tmp_path / "st" / "slurm" / "companion-src").glob("*/.git"))
    code, out, err = run_cli(["bisect", *span, *argv("true && " + CTEST, "--quiet", "--json",
                                                     "--jobs", "3")])
    again = json.loads(out)
    assert code == 0 and again["first_new"] == shas[NEW_FROM] and again["builds"] == 0, err
    assert len([p for p in store.glob("*/meta.json")]) == len(built)
    (bad,) = BROKEN
    code, out, err = run_cli(["probe", "--commit", shas[bad], *span, *argv(CTEST)])
    assert code == 125 and "did not build against this torch" in out, (out, err)


def test_the_next_round_s_images_are_imported_ahead_by_one_cpu_job(tmp_path):
    """The Backend protocol's prefetch on Slurm: one CPU job imports the images into the
    shared directory, under the tasks' lock; an image already there asks for no job."""
    ahead = ahead_backend(tmp_path)
    said = ahead.said
    _, sqsh, _ = ahead.images.locate(IMAGE)
    try:
        ahead.prefetch([IMAGE, "bisect-ngc-test/no-such-image:1"])   # the missing one is left
        job, = ahead.ahead.jobs
        assert said == [f"importing 1 image(s) the next round may need, in job {job}"]
        end = time.monotonic() + 180
        while not sqsh.exists():
            assert time.monotonic() < end, "the import job did not import the image"
            time.sleep(0.5)
        out = "".join(p.read_text() for p in (tmp_path / "shared" / "imports").glob("*.out"))
        assert f"importing dockerd://{IMAGE}" in out
        ahead.prefetch([IMAGE])                      # there already: no job
        assert len(said) == 1
    finally:
        scancel_imports()


def test_an_import_ahead_never_outlives_what_it_was_for(tmp_path):
    """A new list cancels the jobs that have not started and keeps one under way (a round
    may need it); the session's end and Ctrl-C cancel every one."""
    import fcntl
    try:
        later = ahead_backend(tmp_path, "--begin=now+3600")     # jobs that cannot start yet
        later.prefetch([IMAGE])
        first = later.ahead.jobs[-1]
        later.prefetch([IMAGE])
        second = later.ahead.jobs[-1]
        assert second != first
        wait_for(lambda: import_jobs() == {second: "PENDING"})
        later.cancel()
        wait_for(lambda: not import_jobs())
        later.prefetch([IMAGE])                      # after Ctrl-C: nothing more is asked
        assert not import_jobs()

        now = ahead_backend(tmp_path)
        _, sqsh, _ = now.images.locate(IMAGE)
        sqsh.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{sqsh}.lock", "a") as lock:      # held: a job starts, then waits
            fcntl.flock(lock, fcntl.LOCK_EX)
            now.prefetch([IMAGE])
            running = now.ahead.jobs[-1]
            wait_for(lambda: import_jobs().get(running) == "RUNNING")
            now.prefetch([])                         # a round with nothing ahead: kept
            time.sleep(2)
            assert import_jobs().get(running) == "RUNNING"
            now.prefetch([], done=True)              # the answer is found
            wait_for(lambda: not import_jobs())
    finally:
        scancel_imports()


def ahead_backend(tmp_path: Path, *sbatch_args: str):
    from bisect_ngc.backends.slurm.backend import SlurmBackend, SlurmSettings
    from bisect_ngc.core.artifacts import ArtifactStore
    from bisect_ngc.core.recipes import Recipe
    from bisect_ngc.vcs.history import History
    from bisect_ngc.vcs.worktrees import Worktrees
    if not (tmp_path / "r").exists():
        make_repo(tmp_path / "r", 4, 2)
    settings = SlurmSettings(runtime="enroot", image=IMAGE, container_import="dockerd",
                             shared_dir=tmp_path / "shared", partition="cpu",
                             sbatch_args=list(sbatch_args))
    said: list[str] = []
    b = SlurmBackend(Worktrees(History.open(str(tmp_path / "r"), tmp_path), tmp_path / "wt"),
                     Recipe(build=None, test="true", image=IMAGE), settings=settings,
                     store=Store(tmp_path / "st"),
                     artifacts=ArtifactStore(tmp_path / "shared" / "artifacts"), say=said.append)
    b.session = "s-ahead"
    b.said = said                                    # type: ignore[attr-defined]
    return b


def import_jobs() -> dict[str, str]:
    """This test's import jobs in the queue: state by job id."""
    out = subprocess.run(["squeue", "-h", "-o", "%i %j %T"], capture_output=True,
                         text=True).stdout
    jobs = {}
    for line in out.splitlines():
        job, name, state = line.split()
        if name.startswith("bisect-ngc-import-s-ahead"):
            jobs[job.split("_")[0]] = state
    return jobs


def scancel_imports() -> None:
    if import_jobs():
        subprocess.run(["scancel", *import_jobs()], capture_output=True)


def wait_for(condition, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.3)
