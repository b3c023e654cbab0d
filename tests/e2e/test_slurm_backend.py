"""The Slurm backend on a real single-node cluster (scripts/slurm-up.sh starts one: munge,
slurmdbd + MariaDB, slurmctld, slurmd, partitions cpu and gpu, fake gres/gpu; CI runs it).
Skipped, with the reason, where no cluster answers. The pyxis, enroot and apptainer
runtimes cannot run here (no GPU containers, no registry): their scripts are checked as
rendered text only.
"""
from __future__ import annotations

import json
import re
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bisect_ngc.core.probes import ProbeRequest
from bisect_ngc.core.recipes import Mount
from bisect_ngc.backends.slurm.backend import SlurmBackend, SlurmSettings
from bisect_ngc.vcs.history import History
from bisect_ngc.vcs.worktrees import Worktrees
from bisect_ngc.core.artifacts import ArtifactStore
from bisect_ngc.core.recipes import Recipe
from bisect_ngc.core.search import RepeatPolicy, ceil_log
from bisect_ngc.core.records import SlurmJob
from bisect_ngc.core.store import Store

from tests.lib.repos import BUILD, MIXED_RULE, TEST, make_mixed_repo, make_repo
from tests.lib.slurm_cluster import cluster_says
from tests.lib.slurm_cluster import (kill_after_two_rounds_and_rerun, my_jobs, needs_slurm,
                                     run_to_end, state_tag, submitted_tests)









def slurm_args(repo, tmp, *extra, test=TEST):
    n = len(subprocess.run(["git", "rev-list", "--first-parent", "main"], cwd=repo,
                           capture_output=True, text=True).stdout.split())
    return ["bisect", "--repo", str(repo), "--old", f"main~{n - 1}", "--new", "main",
            "--build", BUILD, "--test", test, "--backend", "slurm", "--partition", "cpu",
            "--gpu-partition", "gpu", "--state", str(tmp / "st"), "--quiet", *extra]






def running_tests(tmp: Path) -> list[str]:
    """The job ids of the running test tasks of the state directory tmp/st (not a
    leftover of another test)."""
    out = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%j"],
                         capture_output=True, text=True).stdout
    return [line.split("|")[0] for line in out.splitlines()
            if "|bisect-ngc-test-" in line and line.endswith(f"-{state_tag(tmp)}")]






@needs_slurm
@pytest.mark.parametrize("jobs", [1, 4])
def test_bisects_on_the_cluster_within_the_round_bound(tmp_path, run_cli, jobs):
    n = 160
    shas = make_repo(tmp_path / "r", n, 97, set(range(30, 36)))
    code, out, err = run_cli(slurm_args(tmp_path / "r", tmp_path, "--json", "--jobs",
                                        str(jobs)))
    assert code == 0, err
    res = json.loads(out)
    assert (res["first_new"], res["last_old"]) == (shas[97], shas[96])
    if jobs == 4:
        assert res["rounds"] <= ceil_log(n, 5) + 3
    assert not my_jobs(res["session"])
    assert all(v == 1 for v in submitted_tests(tmp_path, res["session"]).values())
    assert Path(res["report"]).exists()


@needs_slurm
def test_a_probe_cancelled_by_hand_is_retried(tmp_path, capsys):
    shas = make_repo(tmp_path / "r", 40, 25)
    slow = "sleep 4; " + TEST
    args = [sys.executable, "-m", "bisect_ngc"] + slurm_args(tmp_path / "r", tmp_path,
                                                             "--json", test=slow)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim = None
    end = time.monotonic() + 90
    while victim is None and time.monotonic() < end:
        running = running_tests(tmp_path)
        if running:
            victim = running[0]
            subprocess.run(["scancel", victim], check=True)
        time.sleep(0.2)
    out, err = proc.communicate(timeout=240)
    assert victim, "no test task ever ran"
    assert proc.returncode == 0, err
    res = json.loads(out)
    assert res["first_new"] == shas[25]
    assert "retry 1/2" in err
    counts = submitted_tests(tmp_path, res["session"])
    assert sorted(counts.values())[-1] == 2 and list(counts.values()).count(2) == 1
    probes = Store(tmp_path / "st").probes(res["session"])
    assert any(p.details.get("attempt") == 1 for p in probes)
    assert not my_jobs(res["session"])




@needs_slurm
def test_a_killed_controller_reattaches_without_duplicate_submissions(tmp_path, capsys):
    shas = make_repo(tmp_path / "r", 120, 77)
    slow = "sleep 2; " + TEST
    args = [sys.executable, "-m", "bisect_ngc"] + slurm_args(tmp_path / "r", tmp_path,
                                                             "--json", "--jobs", "3",
                                                             test=slow)
    again = kill_after_two_rounds_and_rerun(args, tmp_path / "st", wait=90)
    assert again.returncode == 0, again.stderr
    res = json.loads(again.stdout)
    assert res["first_new"] == shas[77]
    assert "re-attaching" in again.stderr
    counts = submitted_tests(tmp_path, res["session"])
    assert counts and all(v == 1 for v in counts.values()), counts
    assert not my_jobs(res["session"])


@needs_slurm
def test_unknown_partition_is_a_clear_error(tmp_path, run_cli):
    make_repo(tmp_path / "r", 6, 3)
    args = slurm_args(tmp_path / "r", tmp_path)
    args[args.index("cpu")] = "nope"
    code, out, err = run_cli(args)
    assert code == 2 and out == ""
    assert "unknown Slurm partition 'nope' (--partition)" in err
    assert "hint: partitions here:" in err and "gpu" in err


@needs_slurm
def test_dry_run_submits_nothing(tmp_path, run_cli):
    make_repo(tmp_path / "r", 30, 11)
    code, out, _ = run_cli(slurm_args(tmp_path / "r", tmp_path, "--dry-run", "--jobs", "2"))
    assert code == 0
    assert "# ---- build.sh ----" in out and "#SBATCH --array=0-1" in out
    assert "#SBATCH --partition=gpu" in out and "#SBATCH --gpus=1" in out
    names = re.findall(r"^#SBATCH --job-name=(\S+)$", out, re.M)
    assert len(names) == 2
    time.sleep(2)
    for name in names:
        assert not subprocess.run(["sacct", "-n", "-X", "--name", name, "-S", "now-1hour",
                                   "-o", "JobID"], capture_output=True, text=True).stdout.split()
        assert name not in subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True,
                                          text=True).stdout


@needs_slurm
def test_slurm_submit_runs_the_controller_as_a_job(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 24, 9)
    args = slurm_args(tmp_path / "r", tmp_path)
    args[0:1] = ["slurm", "submit"]
    args.remove("--quiet")
    args += ["--controller-partition", "cpu", "--controller-time", "30:00"]
    code, out, _ = run_cli(args)
    assert code == 0
    job = re.search(r"submitted controller job (\d+)", out).group(1)
    report = Path(re.search(r"report: (\S+)", out).group(1))
    end = time.monotonic() + 300
    while not report.exists():
        if time.monotonic() > end:
            out = "".join(p.read_text() for p in tmp_path.rglob("controller/*.out"))
            pytest.fail(f"the controller job never wrote its report\n{out[-3000:]}\n"
                        f"{cluster_says()}")
        time.sleep(0.5)
    assert shas[9][:12] in report.read_text()
    state = subprocess.run(["sacct", "-n", "-P", "-X", "-j", job, "-o", "State"],
                           capture_output=True, text=True).stdout
    end = time.monotonic() + 30
    while "COMPLETED" not in state and time.monotonic() < end:
        time.sleep(0.5)
        state = subprocess.run(["sacct", "-n", "-P", "-X", "-j", job, "-o", "State"],
                               capture_output=True, text=True).stdout
    assert "COMPLETED" in state


# --- rendering only: these runtimes cannot run here ----------------------------------

@pytest.fixture
def backend(tmp_path):
    make_repo(tmp_path / "r", 4, 2)
    history = History.open(str(tmp_path / "r"), tmp_path)

    def make(runtime: str, **kw) -> SlurmBackend:
        settings = SlurmSettings(runtime=runtime, image="nvcr.io/nvidia/pytorch:24.09-py3",
                                 shared_dir=tmp_path / "shared", partition="cpu",
                                 gpu_partition="gpu", account="proj'; rm -rf /",
                                 sbatch_args=["--constraint=h100"], **kw)
        recipe = Recipe(build="make -j8", test="python -m repro --seed '$(reboot)'",
                        image=settings.image, timeout=600,
                        mounts=[Mount(Path("/opt/x"), "/opt/bisect-ngc/repro")])
        return SlurmBackend(Worktrees(history, tmp_path / "wt"), recipe, settings=settings,
                            store=Store(tmp_path / "st"),
                            artifacts=ArtifactStore(tmp_path / "shared" / "artifacts"))
    return make


def requests(n=2):
    return [ProbeRequest(session="s-1", commit=f"{i:040x}", index=i, slot=i, runs=3,
                         policy=RepeatPolicy.ANY, log_dir=Path("/tmp"), artifacts_dir=Path("/tmp"))
            for i in range(n)]


def test_pyxis_script(backend):
    (_, build), (_, test) = backend("pyxis").dry_run(requests())
    assert 'srun --ntasks=1 --container-image="$SQSH"' in test
    assert "enroot import -o \"$SQSH.tmp\" docker://nvcr.io/nvidia/pytorch:24.09-py3" in test
    assert "/enroot/nvcr.io+nvidia+pytorch+24.09-py3@tag.sqsh" in test
    assert "--container-mounts=" in test and ":/opt/bisect-ngc/repro:ro" in test
    assert "#SBATCH --account='proj'\"'\"'; rm -rf /'" in build
    assert "#SBATCH --constraint=h100" in test and "#SBATCH --gpus=1" in test
    assert "timeout -k 10 600" in test and "for run in $(seq 1 3)" in test


def test_enroot_script(backend):
    (_, build), (_, test) = backend("enroot").dry_run(requests())
    assert "enroot import -o" in test and "docker://nvcr.io/nvidia/pytorch:24.09-py3" in test
    assert "enroot start --rw --env BISECT_COMMIT" in test and '"$ENROOT_TARGET"' in test
    assert ":none:x-create=dir,rbind,ro" in test and '${ADMIN:+--mount "$ADMIN"}' in test
    assert "enroot remove --force" in test


def test_apptainer_script(backend):
    (_, build), (_, test) = backend("apptainer").dry_run(requests())
    assert "apptainer exec --nv --pwd" in test
    assert "docker://nvcr.io/nvidia/pytorch:24.09-py3" in test
    assert "apptainer exec --pwd" in build       # builds get no GPU
    assert "bash -c 'python -m repro --seed '\"'\"'$(reboot)'\"'\"''" in test


def test_bare_metal_script(backend):
    (_, build), (_, test) = backend("none").dry_run(requests(3))
    assert "#SBATCH --array=0-2" in build and "#SBATCH --partition=cpu" in build
    assert "env -C \"$BISECT_WORKTREE\" bash -c 'make -j8'" in build
    assert "srun" not in test and "apptainer" not in test


@pytest.mark.parametrize("runtime", ["none", "pyxis", "enroot", "apptainer"])
def test_scripts_are_valid_bash(backend, runtime):
    for _, script in backend(runtime).dry_run(requests(2)):
        r = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
        assert r.returncode == 0, r.stderr


@needs_slurm
def test_ctrl_c_cancels_every_job_of_the_session(tmp_path):
    make_repo(tmp_path / "r", 60, 30)
    args = [sys.executable, "-m", "bisect_ngc"] + slurm_args(tmp_path / "r", tmp_path,
                                                             "--jobs", "2",
                                                             test="sleep 30; " + TEST)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 90
    store = Store(tmp_path / "st")
    while True:
        assert time.monotonic() < end, "no probe job was submitted"
        latest = store.latest()
        if latest and my_jobs(latest.id):
            break
        time.sleep(0.2)
    sid = latest.id
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "run the same command again to resume" in err
    end = time.monotonic() + 30
    while my_jobs(sid) and time.monotonic() < end:
        time.sleep(0.5)
    assert not my_jobs(sid)
    jobs = sorted({j for job in store.slurm_jobs(sid).values()
                   for j in (job.build_job, job.test_job)})
    assert jobs
    end = time.monotonic() + 30
    while True:   # slurmdbd records the cancellation a moment later
        states = subprocess.run(["sacct", "-n", "-P", "-X", "-j", ",".join(jobs), "-o",
                                 "JobID,State"], capture_output=True, text=True).stdout
        if "CANCELLED" in states or time.monotonic() > end:
            break
        time.sleep(0.5)
    assert "CANCELLED" in states, states


@needs_slurm
def test_ctrl_c_never_uses_up_a_retry(tmp_path):
    shas = make_repo(tmp_path / "r", 30, 19)
    args = [sys.executable, "-m", "bisect_ngc"] + slurm_args(
        tmp_path / "r", tmp_path, "--json", "--max-retries", "0", test="sleep 3; " + TEST)
    for _ in range(2):      # two Ctrl-Cs while test tasks run, then a run to the end
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        end = time.monotonic() + 90
        while True:
            assert time.monotonic() < end and proc.poll() is None, \
                f"no test task ran\n{cluster_says()}"
            if running_tests(tmp_path):
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    again = run_to_end(args, 300)
    assert again.returncode == 0, again.stderr
    res = json.loads(again.stdout)
    assert res["first_new"] == shas[19] and not res["skipped"]
    assert "cancelled by an interrupted run; resubmitting" in again.stderr


@needs_slurm
def test_a_controller_killed_between_the_two_sbatch_calls_submits_no_build_twice(tmp_path):
    shas = make_repo(tmp_path / "r", 30, 19)
    shim = tmp_path / "bin"
    shim.mkdir()
    # The real sbatch, except that the first test-array submission kills the controller.
    (shim / "sbatch").write_text(
        "#!/bin/sh\n"
        f'case "$*" in *test.sh*) if [ ! -e {tmp_path}/killed ]; then '
        f"touch {tmp_path}/killed; kill -9 $PPID; exit 1; fi;; esac\n"
        f'exec {shutil.which("sbatch")} "$@"\n')
    (shim / "sbatch").chmod(0o755)
    env = dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}")
    args = [sys.executable, "-m", "bisect_ngc"] + slurm_args(tmp_path / "r", tmp_path, "--json")
    first = run_to_end(args, 120, env=env)
    assert first.returncode == -9 and (tmp_path / "killed").exists()
    again = run_to_end(args, 300, env=env)
    assert again.returncode == 0, again.stderr
    res = json.loads(again.stdout)
    assert res["first_new"] == shas[19]
    assert "submitted the test array" in again.stderr
    name = f"bisect-ngc-build-{res['session']}-{state_tag(tmp_path)}"
    rounds = list((tmp_path / "st" / "slurm" / "rounds" / res["session"]).iterdir())
    end = time.monotonic() + 30
    while True:     # slurmdbd records jobs a moment after they end
        builds = {j.split("_")[0] for j in subprocess.run(
            ["sacct", "-n", "-P", "-X", "--name", name, "-o", "JobID"],
            capture_output=True, text=True).stdout.split()}
        if len(builds) >= len(rounds) or time.monotonic() > end:
            break
        time.sleep(0.5)
    assert len(builds) == len(rounds), (builds, rounds)


@needs_slurm
@pytest.mark.parametrize("reported,status", [("0" * 40, "invalid-endpoints"),
                                             ("$BISECT_COMMIT", "found")])
def test_the_torch_commit_check_holds_on_the_cluster(tmp_path, reported, status):
    shas = make_repo(tmp_path / "r", 20, 13)
    test = f'echo "{{\\"torch_git_version\\": \\"{reported}\\"}}"; ' + TEST
    args = [sys.executable, "-m", "bisect_ngc"] + slurm_args(
        tmp_path / "r", tmp_path, "--json", "--check-torch-commit", test=test)
    proc = run_to_end(args, 300)
    res = json.loads(proc.stdout)
    assert res["status"] == status, proc.stderr
    if status == "found":
        assert res["first_new"] == shas[13]
    else:
        assert res["endpoint_reasons"]["old"] == (f"the container reports torch git version "
                                                  f"{'0' * 40}, not the probed commit "
                                                  f"{shas[0][:12]}")


def test_the_enroot_script_quotes_a_hostile_shared_dir(tmp_path):
    """Runs the rendered enroot test script with bash. enroot itself cannot run here, so a
    stand-in `enroot` on PATH runs `start`'s command directly: the quoting under test is
    the script's own, which reaches bash exactly as it would reach enroot."""
    make_repo(tmp_path / "r", 4, 2)
    history = History.open(str(tmp_path / "r"), tmp_path)
    shared = tmp_path / "shared dir $(touch PWNED)"
    settings = SlurmSettings(runtime="enroot", image="nvcr.io/nvidia/pytorch:24.09-py3",
                             shared_dir=shared)
    recipe = Recipe(build=None, test=f"pwd > {tmp_path}/where; exit 0", image=settings.image)
    backend = SlurmBackend(Worktrees(history, shared / "worktrees"), recipe, settings=settings,
                           store=Store(tmp_path / "st"),
                           artifacts=ArtifactStore(shared / "artifacts"))
    backend.session = "s-1"
    worktree, final = shared / "worktrees" / "lane-0" / "slot-x", shared / "artifacts" / "k"
    worktree.mkdir(parents=True)
    final.mkdir(parents=True)
    (final / "meta.json").write_text("{}")
    tasks = [{"commit": "a" * 40, "worktree": str(worktree), "index": 0, "final": str(final),
              "staging": str(shared / "staging")}]
    _, test = backend.render("r1", tasks, 1, RepeatPolicy.ANY)
    backend.round_dir("r1").mkdir(parents=True)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "enroot").write_text(
        '#!/bin/bash\n'
        'case "$1" in\n'
        '  import) while [ "$1" != "-o" ]; do shift; done; touch "$2" ;;\n'
        '  start) shift; while [ "${1#--}" != "$1" ]; do case "$1" in --mount|--env) shift;;'
        ' esac; shift; done; shift; exec "$@" ;;\n'
        'esac\n')
    (fake / "enroot").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", SLURM_ARRAY_TASK_ID="0",
               SLURM_JOB_ID="7")
    run = subprocess.run(["bash", "-c", test], env=env, capture_output=True, text=True,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    result = json.loads((backend.round_dir("r1") / "result-0.json").read_text())
    assert result["codes"] == [0]
    assert (tmp_path / "where").read_text().strip() == str(worktree)
    assert not list(tmp_path.rglob("PWNED"))


@needs_slurm
def test_prebuilt_artifacts_are_test_only_jobs(tmp_path, run_cli):
    shas = make_repo(tmp_path / "r", 40, 27)
    arts = tmp_path / "arts"
    arts.mkdir()
    for i in (0, 10, 20, 30, 39):
        (arts / f"out-{shas[i][:12]}").write_text(("new" if i >= 27 else "old") + "\n")
    args = slurm_args(tmp_path / "r", tmp_path, "--json", "--artifacts", arts,
                      test='test "$(cat "$BISECT_ARTIFACTS"/out*)" = old')
    args[args.index(BUILD)] = 'cp behaviour "$BISECT_ARTIFACTS/out"'
    code, out, err = run_cli(args)
    assert code == 0, err
    res = json.loads(out)
    assert res["first_new"] == shas[27] and res["prebuilt"] >= 3
    store = Store(tmp_path / "st")
    recs = store.slurm_jobs(res["session"])
    tiers = {p.commit: p.details["tier"] for p in store.probes(res["session"])}
    assert all(recs[c].build_job is None for c, t in tiers.items() if t == "prebuilt")
    assert all(recs[c].build_job for c, t in tiers.items() if t == "build")
    assert {c for c, t in tiers.items() if t == "build"} <= set(shas[21:30])


@needs_slurm
def test_the_image_tier_runs_as_test_only_jobs_in_each_image(tmp_path, run_cli, monkeypatch):
    """Release mode on the real cluster with `--container-runtime enroot`. enroot cannot
    run here, so a stand-in on PATH (the jobs inherit it) records each image it imports
    and runs `start`'s command directly; scheduling, rounds and quoting are the real ones."""
    shas = make_repo(tmp_path / "pytorch", 120, 70)
    rows = [("90.01", shas[10]), ("90.02", shas[40]), ("90.03", shas[60]),
            ("90.04", shas[90]), ("90.05", shas[110])]
    (tmp_path / "catalog.tsv").write_text(
        "release\ttorch_version\ttorch_commit\ttorch_verified\tcuda\tcuda_verified\t"
        "transformer_engine\tte_verified\tpython\tubuntu\n" +
        "".join(f"{r}\t2.9.0a0+{c[:10]}\t{c}\tV1\t12.9\tU\t2.0\tU\t\t24.04\n" for r, c in rows))
    monkeypatch.setenv("BISECT_NGC_CATALOG", str(tmp_path / "catalog.tsv"))
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "enroot").write_text(
        '#!/bin/bash\n'
        'case "$1" in\n'
        f'  import) echo "${{@: -1}}" >> {tmp_path}/imported; '
        'while [ "$1" != "-o" ]; do shift; done; touch "$2" ;;\n'
        '  start) shift; while [ "${1#--}" != "$1" ]; do case "$1" in --mount|--env) shift;;'
        ' esac; shift; done; shift; exec "$@" ;;\n'
        'esac\n')
    (fake / "enroot").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    code, out, err = run_cli([
        "bisect", "--from", "90.01", "--to", "90.05", "--torch-repo", tmp_path / "pytorch",
        "--backend", "slurm", "--container-runtime", "enroot", "--partition", "cpu",
        "--gpu-partition", "gpu", "--build", 'cp behaviour "$BISECT_ARTIFACTS/out"',
        "--test", 'test "$(cat behaviour)" = old', "--no-nightlies", "--state",
        tmp_path / "st", "--quiet", "--json"])
    assert code == 0, err
    res = json.loads(out)
    assert res["first_new"] == shas[70]
    store = Store(tmp_path / "st")
    recs = store.slurm_jobs(res["session"])
    probes = store.probes(res["session"])
    images = {p.details["source"] for p in probes if p.details["tier"] == "image"}
    assert {"NGC 90.01", "NGC 90.03", "NGC 90.04", "NGC 90.05"} <= images
    assert all(recs[p.commit].build_job is None for p in probes
               if p.details["tier"] == "image")
    builds = [p for p in probes if p.details["tier"] == "build"]
    # the two adjacent releases' own commits in the build environment first (the evidence
    # rule), then the commits between them, all built in the older one's image
    assert {50, 80} <= {p.idx for p in builds} <= set(range(50, 81))
    assert {p.details["environment"]["base"] for p in builds} == {"nvcr.io/nvidia/pytorch:90.03-py3"}
    imported = set((tmp_path / "imported").read_text().split())
    assert {"docker://nvcr.io/nvidia/pytorch:90.03-py3",
            "docker://nvcr.io/nvidia/pytorch:90.04-py3"} <= imported


@needs_slurm
@pytest.mark.parametrize("jobs", [1, 2])
def test_overlay_probes_are_test_only_jobs(tmp_path, run_cli, jobs):
    shas = make_mixed_repo(tmp_path / "r", 40, 27, set(range(19, 36)))
    py = shlex.quote(sys.executable)     # builds on the node: this venv's setuptools
    build = f'{py} setup.py -q bdist_wheel -d "$BISECT_ARTIFACTS"'
    test = (f'site=$(mktemp -d) && {py} -m pip install -q --no-deps --no-index --target "$site" '
            f'"$BISECT_ARTIFACTS"/mixpkg-*.whl || exit 125; cd "$site" && {py} -c '
            '"import mixpkg, sys; sys.exit(mixpkg.answer() != 41)"; rc=$?; rm -rf "$site"; '
            'exit $rc')
    args = slurm_args(tmp_path / "r", tmp_path, "--json", "--jobs", str(jobs),
                      *(f"--overlay-rule={r}" for r in MIXED_RULE), test=test)
    args[args.index(BUILD)] = build
    code, out, err = run_cli(args)
    assert code == 0, err
    res = json.loads(out)
    assert res["first_new"] == shas[27] and res["overlays"] > 0
    store = Store(tmp_path / "st")
    recs = store.slurm_jobs(res["session"])
    tiers = {p.commit: p.details["tier"] for p in store.probes(res["session"])}
    assert all(recs[c].build_job is None for c, t in tiers.items() if t == "overlay")
    assert all(recs[c].build_job for c, t in tiers.items() if t == "build")
    assert res["builds"] == sum(t == "build" for t in tiers.values()) < 6


# --- the judgement of polling, without a cluster ------------------------------------

def test_a_task_that_left_the_queue_ends_as_its_accounting_says():
    from bisect_ngc.backends.slurm.queue import UNACCOUNTED_AFTER_S, task_end
    assert task_end("COMPLETED", "COMPLETED", 5) == "COMPLETED"
    assert task_end(None, "NODE_FAIL", 5) == "NODE_FAIL"          # the build decided it
    assert task_end("CANCELLED", "OUT_OF_MEMORY", 5) == "OUT_OF_MEMORY"
    assert task_end("FAILED", "NODE_FAIL", 5) == "FAILED"         # the test ran: its own end
    assert task_end(None, None, 5) is None                        # not accounted for yet
    assert task_end(None, None, UNACCOUNTED_AFTER_S + 1) == "UNKNOWN"
    assert task_end("RUNNING", None, 1000) is None


def test_a_task_cut_short_is_tested_again_whatever_its_accounting_says():
    """scancel mid-test can leave the task accounted COMPLETED with no result file (seen
    in CI): that is a cut-short run, retried, never "could not be tested"."""
    from bisect_ngc.backends.slurm.queue import end_action
    assert end_action("COMPLETED", cancelled_by_us=False) == "retry"
    assert end_action("CANCELLED", cancelled_by_us=False) == "retry"
    assert end_action("COMPLETED", cancelled_by_us=True) == "resubmit"   # our Ctrl-C
    assert end_action("CANCELLED", cancelled_by_us=True) == "resubmit"
    assert end_action("NODE_FAIL", cancelled_by_us=True) == "retry"
    assert end_action("UNKNOWN", cancelled_by_us=False) == "retry"
    assert end_action("TIMEOUT", cancelled_by_us=False) == "skip"
    assert end_action("FAILED", cancelled_by_us=True) == "skip"


def test_the_queue_says_which_phase_a_probe_is_in():
    from bisect_ngc.backends.slurm.queue import queue_phase
    rec = SlurmJob("c", "r", 2, build_job="10", test_job="11")
    assert queue_phase(rec, {"10_2": "RUNNING", "11": "PENDING"}) == "build"
    assert queue_phase(rec, {"11_2": "RUNNING"}) == "test"
    assert queue_phase(rec, {"11": "PENDING"}) == "queued"       # a pending array range
    assert queue_phase(rec, {}) is None
    assert queue_phase(SlurmJob("c", "r", 0, test_job="11"), {}) is None


@needs_slurm
def test_same_node_pins_every_test_job_after_the_first(tmp_path, run_cli):
    """The test cluster has one node: the request is what is checked."""
    shas = make_repo(tmp_path / "r", 40, 23)
    code, out, err = run_cli(slurm_args(tmp_path / "r", tmp_path, "--json", "--same-node"))
    assert code == 0, err
    res = json.loads(out)
    assert res["first_new"] == shas[23]
    node = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True,
                          text=True).stdout.split()[0]
    scripts = sorted((tmp_path / "st" / "slurm" / "rounds" / res["session"]).glob("*/test.sh"),
                     key=lambda p: p.stat().st_mtime)
    pinned = [f"#SBATCH --nodelist={node}" in s.read_text() for s in scripts]
    assert len(scripts) >= 4 and not pinned[0] and all(pinned[1:]), pinned


@needs_slurm
def test_a_metric_bisection_runs_each_run_as_a_job_of_its_own(tmp_path, run_cli):
    """--metric on the cluster: every run of a commit is a new job (never the first run's
    job re-attached). A two-level number keeps the runs few; the statistics are tested
    elsewhere."""
    shas = make_repo(tmp_path / "r", 3, 1)
    test = ('python3 -c "import json, random; b = open(\'behaviour\').read().strip(); '
            'print(json.dumps({\'t\': (2.0 if b == \'new\' else 1.0) * '
            'random.uniform(0.99, 1.01)}))"')
    code, out, err = run_cli(slurm_args(tmp_path / "r", tmp_path, "--json", "--metric", "t",
                                        "--runs-per-round", "2", "--max-runs", "10",
                                        "--p-threshold", "0.25", "--same-node", test=test))
    assert code == 0, err
    res = json.loads(out)
    assert res["first_new"] == shas[1] and res["metric"]["culprit"]["worse"]
    assert "re-attaching" not in err
    probes = Store(tmp_path / "st").probes(res["session"])
    values = [p.details["samples"][0] for p in probes]
    assert len(values) >= 6 and len(set(values)) == len(values)     # every number measured
    jobs = {job.test_job for job in Store(tmp_path / "st").slurm_jobs(res["session"]).values()}
    assert len(jobs) == len(probes)                                  # a test job per run


def test_the_import_ahead_script_quotes_a_hostile_image_name(tmp_path):
    """The import job's script run by bash with a stand-in `enroot` that fails: the name
    reaches enroot and both messages as it was written, and nothing in it runs."""
    from bisect_ngc.backends.slurm.scripts import TEMPLATES
    uri = f'docker://h:5000/a/b:1"$(touch {tmp_path}/PWNED)"'
    sqsh = tmp_path / "it's shared" / "x.sqsh"
    script = TEMPLATES.get_template("slurm-import.sh.j2").render(
        name="n", partition="cpu", account=None, qos=None, time=None, extra=[],
        out="o", images=[(str(sqsh), uri), (str(sqsh), uri)])
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "enroot").write_text(
        f'#!/bin/bash\nprintf "%s\\n" "$@" > {tmp_path}/args\nexit 1\n')
    (fake / "enroot").chmod(0o755)
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                         env=dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}"))
    assert run.returncode == 0, run.stderr       # a failed import is left to the tasks
    assert run.stderr.count(f"bisect-ngc: could not import {uri} into {sqsh}") == 2
    assert (tmp_path / "args").read_text().splitlines()[-1] == uri
    assert not (tmp_path / "PWNED").exists()


def test_an_import_ahead_that_cannot_write_its_script_is_only_said(tmp_path):
    from bisect_ngc.backends.slurm.images import ImportAhead, SquashfsImages
    from bisect_ngc.backends.slurm.queue import Scheduler
    (tmp_path / "imports").write_text("a file where the directory would go")
    said: list[str] = []
    settings = SlurmSettings(runtime="enroot", image="h:5000/a/b:1", shared_dir=tmp_path)
    ahead = ImportAhead(settings, Scheduler(), SquashfsImages(tmp_path, "registry"),
                        said.append)
    ahead.submit(["h:5000/a/b:1"], "tag")
    assert ahead.jobs == [] and len(said) == 1
    assert said[0].startswith("could not import the next round's images ahead")
