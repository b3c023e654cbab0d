"""Which part of the container (issue 21, item 4) on the real Docker engine: two images
built from the test image to NGC's layout (pip's /usr/local/lib/python3.X/dist-packages,
a library in /usr/local/lib, variables in the image config) that differ in 10 components:
five generated distributions at two versions, a "torch" stand-in whose version.py carries
its commit, a shared library at two versions, two variables, and a distribution that only
the older image has (which no swap can take out: unswappable, said so)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.lib.component_images import PACKAGES, build_image, wheel

from tests.lib.docker_engine import IMAGE, PROBLEM, commit_image, docker_client

pytestmark = [pytest.mark.docker, pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")]







@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("images")
    for side in ("a", "b"):
        build_image(side, tmp)
    yield "bisect-ngc-test/components:a", "bisect-ngc-test/components:b"
    for side in ("a", "b"):
        docker_client().images.remove(f"bisect-ngc-test/components:{side}", force=True)


def attribute(run_cli, pair, tmp_path, test):
    code, out, err = run_cli(["components", "--from", pair[0], "--to", pair[1], "--test", test,
                              "--cache-dir", tmp_path / "cache", "--json"])
    return code, json.loads(out), err


def swaps(res) -> int:
    return len(res["swaps"])


def test_the_inventory_reads_ngc_layout_and_the_diff(pair, tmp_path, run_cli):
    code, res, err = attribute(run_cli, pair, tmp_path, 'python3 -c "import gamma, sys; '
                               'sys.exit(gamma.behaviour != \'a\')"')
    units = {c["unit"]: (c["in_a"], c["in_b"]) for c in res["components"]}
    assert {f"py:{p}" for p in PACKAGES} | {"py:torch", "py:zeta", "lib:libbisectdemo",
                                             "lib:libnccl", "env:NCCL_VERSION",
                                             "env:DEMO_MODE", "env:DEMO_THREADS"} == set(units)
    assert {"name": "nccl", "a": "2.21.5", "b": "2.23.4", "kind": "component"} in \
        res["config_diff"]
    assert res["suspects"] == ["lib:libnccl", "env:NCCL_VERSION"]  # what the configs say moved
    assert units["py:torch"] == ("2.5.0a0+aaaaaaaaaa", "2.5.0a0+bbbbbbbbbb")
    assert units["lib:libbisectdemo"] == ("libbisectdemo.so.1.0", "libbisectdemo.so.1.1")
    assert units["py:zeta"] == ("1.0", None) and "py:zeta" in res["unswappable"]
    assert "take them out" in res["unswappable"]["py:zeta"]


@pytest.mark.parametrize("test,culprits", [
    ('python3 -c "import gamma, sys; sys.exit(gamma.behaviour != \'a\')"', ["py:gamma"]),
    ('python3 -c "import torch, sys; sys.exit(torch.behaviour != \'a\')"', ["py:torch"]),
    ('python3 -c "import ctypes, sys; '
     'sys.exit(ctypes.CDLL(\'libbisectdemo.so.1\').bisect_demo() != 41)"',
     ["lib:libbisectdemo"]),
    ('test "$DEMO_MODE" = old', ["env:DEMO_MODE"]),
])
def test_one_component_is_named_in_few_swaps(pair, tmp_path, run_cli, test, culprits):
    code, res, err = attribute(run_cli, pair, tmp_path, test)
    assert code == 0, (res, err)
    assert res["attribution"]["status"] == "found" and res["attribution"]["culprits"] == culprits
    n = len(res["components"]) - len(res["unswappable"])
    assert swaps(res) <= 2 * math.ceil(math.log2(n)) + 2
    again = attribute(run_cli, pair, tmp_path, test)[1]      # every swap kept: none runs again
    assert again["attribution"] == res["attribution"] and again["swaps"] == res["swaps"]


def test_two_components_needed_together_are_both_named(pair, tmp_path, run_cli):
    test = ('test "$DEMO_THREADS" = 4 || python3 -c "import beta, sys; '
            'sys.exit(beta.behaviour != \'a\')"')
    code, res, _ = attribute(run_cli, pair, tmp_path, test)
    assert code == 0 and set(res["attribution"]["culprits"]) == {"env:DEMO_THREADS", "py:beta"}


def test_only_searches_the_named_components_and_refuses_unknown_ones(pair, tmp_path, run_cli):
    test = 'python3 -c "import gamma, sys; sys.exit(gamma.behaviour != \'a\')"'
    argv = ["components", "--from", pair[0], "--to", pair[1], "--test", test,
            "--cache-dir", tmp_path / "cache", "--json"]
    code, out, _ = run_cli(argv + ["--only", "py:gamma", "--only", "env:DEMO_MODE"])
    res = json.loads(out)
    assert code == 0 and res["attribution"]["culprits"] == ["py:gamma"]
    assert {c["unit"] for c in res["components"]} == {"py:gamma", "env:DEMO_MODE"}
    code, out, _ = run_cli(argv + ["--only", "py:alpha"])
    assert code == 4 and json.loads(out)["attribution"]["status"] == "not-in-components"
    code, _, err = run_cli(argv + ["--only", "py:gama"])
    assert code == 2 and "no component py:gama differs between" in err
    assert "py:gamma" in err      # the hint lists the differing ones


def test_a_swap_that_does_not_load_is_a_skip_with_its_reason(pair, tmp_path, run_cli):
    """Case D: B's `omega` carries an extension built for another Python (cpython-399):
    any swap that puts it into A cannot import it. Those swaps are skips that say why,
    never verdicts, and the behaviour is still traced to gamma."""
    wheels = tmp_path / "omega"
    wheels.mkdir()
    wheel(wheels, "omega", "1.0", {"omega/__init__.py": "VALUE = 1\n"})
    wheel(wheels, "omega", "2.0", {"omega/__init__.py": "from ._ext import VALUE\n",
                                   "omega/_ext.cpython-399-x86_64-linux-gnu.so": "\x7fELF"})
    tags = []
    for image, version, tag in ((pair[0], "1.0", "d-a"), (pair[1], "2.0", "d-b")):
        commit_image(image, "pip install -q --no-deps --no-index --break-system-packages "
                            f"/w/omega-{version}-py3-none-any.whl", "bisect-ngc-test/components",
                     tag, volumes=[f"{wheels}:/w:ro"])
        tags.append(f"bisect-ngc-test/components:{tag}")
    try:
        code, res, err = attribute(run_cli, tags, tmp_path,
                                   'python3 -c "import gamma, sys; sys.exit(gamma.behaviour != \'a\')"')
    finally:
        for tag in tags:
            docker_client().images.remove(tag, force=True)
    assert "py:omega" in {c["unit"] for c in res["components"]}
    skipped = [s for s in res["swaps"] if s["side"] == "skip"]
    assert skipped and all("py:omega" in s["components"] for s in skipped)
    assert all("does not load" in s["why"] and "omega" in s["why"] for s in skipped), skipped
    assert "does not load" in err
    assert code == 0 and res["attribution"]["status"] == "found", res["attribution"]
    assert res["attribution"]["culprits"] == ["py:gamma"]
    assert "py:omega, py:zeta could not be put into A" in res["attribution"]["explanation"]


def test_images_that_behave_alike_are_not_attributed(pair, tmp_path, run_cli):
    code, res, _ = attribute(run_cli, pair, tmp_path, "true")
    assert code == 3 and res["attribution"]["status"] == "invalid-endpoints"


def test_a_culprit_no_swap_can_put_in_is_unresolved_not_a_definite_no(pair, tmp_path,
                                                                      run_cli):
    """Finding 5 of issue 30: zeta (only in A) decides, and no swap can take it out of A:
    "not in these components" would be a wrong answer."""
    code, res, _ = attribute(run_cli, pair, tmp_path, "python3 -c 'import zeta'")
    assert code == 4 and res["attribution"]["status"] == "unresolved", res["attribution"]
    assert res["attribution"]["culprits"] == [] and "py:zeta" in \
        res["attribution"]["explanation"]


def test_a_difference_outside_the_components_names_none(pair, tmp_path, run_cli):
    """A file no inventory lists makes B: with every differing component swappable, fresh
    swaps of everything both ways say so."""
    client = docker_client()
    commit_image(pair[1], "echo new > /etc/bisect-demo", "bisect-ngc-test/components",
                 "b-file")
    try:
        code, out, err = run_cli([
            "components", "--from", pair[0], "--to", "bisect-ngc-test/components:b-file",
            "--test", "! test -e /etc/bisect-demo", "--only", "py:gamma", "--only",
            "env:DEMO_MODE", "--cache-dir", tmp_path / "cache", "--json"])
    finally:
        client.images.remove("bisect-ngc-test/components:b-file", force=True)
    res = json.loads(out)
    assert code == 4 and res["attribution"]["status"] == "not-in-components", (res, err)
    assert res["attribution"]["culprits"] == [] and len(res["checks"]) >= 3


@pytest.mark.parametrize("variable", ["LD_LIBRARY_PATH", "PYTHONPATH"])
def test_a_culprit_in_a_search_path_variable_is_named(pair, tmp_path, run_cli, variable):
    """Finding 4 of issue 30: B's value of LD_LIBRARY_PATH (or PYTHONPATH) reaches the
    test, behind the swap's own directory, which stays in place."""
    client = docker_client()
    tags = {"a": f"{variable.lower()}-a", "b": f"{variable.lower()}-b"}
    for side, base in zip("ab", pair):
        commit_image(base, "true", "bisect-ngc-test/components", tags[side],
                     changes=[f"ENV {variable}=/opt/{'old' if side == 'a' else 'new'}/lib"])
    test = f'case ":${variable}:" in *:/opt/new/lib:*) exit 1;; esac'
    try:
        code, out, err = run_cli([
            "components", "--from", f"bisect-ngc-test/components:{tags['a']}", "--to",
            f"bisect-ngc-test/components:{tags['b']}", "--test", test, "--only",
            f"env:{variable}", "--only", "py:gamma", "--only", "env:DEMO_MODE",
            "--cache-dir", tmp_path / "cache", "--json"])
    finally:
        for tag in tags.values():
            client.images.remove(f"bisect-ngc-test/components:{tag}", force=True)
    res = json.loads(out)
    assert code == 0 and res["attribution"]["culprits"] == [f"env:{variable}"], (res, err)


def test_a_skipped_swap_never_adds_a_component_that_does_nothing(pair, tmp_path, run_cli):
    """Finding 2 of issue 30: gamma decides; A with B's gamma but A's DEMO_MODE cannot be
    judged (the test says 125). Read as "like A", that skip made DEMO_MODE a culprit."""
    test = ('python3 -c "import gamma, os, sys; b = gamma.behaviour == \'b\'; '
            'sys.exit(125 if b and os.environ[\'DEMO_MODE\'] == \'old\' else b)"')
    code, res, err = attribute(run_cli, pair, tmp_path, test)
    answer = res["attribution"]
    assert "env:DEMO_MODE" not in answer["culprits"], answer
    assert answer["status"] == "unresolved" and "env:DEMO_MODE" in answer["explanation"]
    assert code == 4


def release_bisect(run_cli, pair, tmp_path, monkeypatch, test: str, *extra,
                   history=(40, 23), ships=(5, 30)):
    """`bisect --from 90.01 --to 90.02` over a generated PyTorch history (n commits, new
    from one), the releases shipping two of them, the pair tagged as their images.
    Returns (exit code, the JSON result, stderr, shas)."""
    from tests.lib.repos import make_repo
    from tests.lib.repos import catalog
    shas = make_repo(tmp_path / "pytorch", *history)
    monkeypatch.setenv("BISECT_NGC_CATALOG", str(catalog(
        tmp_path, [("90.01", shas[ships[0]]), ("90.02", shas[ships[1]])])))
    client = docker_client()
    for side, name in zip(pair, ("90.01", "90.02")):
        client.images.get(side).tag(f"nvcr.io/nvidia/pytorch:{name}-py3")
    try:
        code, out, err = run_cli([
            "bisect", "--from", "90.01", "--to", "90.02", "--torch-repo", tmp_path / "pytorch",
            "--backend", "docker", "--build", 'cp behaviour "$BISECT_ARTIFACTS/out"', "--test",
            test, "--no-nightlies", "--gpus", "none", "--state", tmp_path / "st", "--cache-dir",
            tmp_path / "cache", "--quiet", "--json", *extra])
    finally:
        for name in ("90.01", "90.02"):
            client.images.remove(f"nvcr.io/nvidia/pytorch:{name}-py3")
    return code, json.loads(out), err, shas


def test_release_mode_never_says_not_in_pytorch_from_one_flaky_swap(pair, tmp_path, run_cli,
                                                                     monkeypatch):
    """Finding 1 of issue 30: B's PyTorch makes the test fail, except on the first run
    of a swap (a flake, seeded by BISECT_RUN). With --repeat 3 --repeat-policy any, the
    swap that asks "does B's PyTorch carry it?" runs until a run fails, so the commits
    are bisected; one run said "not in PyTorch" (exit 5)."""
    flaky = ("import torch, os, sys; first = os.environ.get('BISECT_RUN', '1') == '1'; "
             "swapped = 'swaps' in os.environ.get('PYTHONPATH', ''); "
             "sys.exit(torch.behaviour != 'a' and not (first and swapped))")
    test = ('if [ -f "$BISECT_ARTIFACTS/out" ]; then test "$(cat "$BISECT_ARTIFACTS/out")" = '
            f'old; else python3 -c "{flaky}"; fi')
    code, res, err, shas = release_bisect(run_cli, pair, tmp_path, monkeypatch, test,
                                          "--repeat", "3")
    assert code == 0 and res["first_new"] == shas[23], (res, err)
    assert swap_rows(tmp_path)[json.dumps(["a", ["py:torch"]])] == "b"


def test_release_mode_names_the_component_with_no_build(pair, tmp_path, run_cli, monkeypatch):
    """Case A of issue 21: two releases whose images differ outside PyTorch. One swap of
    the newer PyTorch into the older image says PyTorch does not carry the difference, so
    no commit is named and nothing is built; attribution names the variable."""
    from bisect_ngc.core.store import Store
    code, res, err, _ = release_bisect(run_cli, pair, tmp_path, monkeypatch,
                                       'test "$DEMO_MODE" = old', history=(30, 29),
                                       ships=(5, 20))       # every commit in range: old
    assert code == 5 and res["status"] == "not-in-commits" and res["first_new"] is None, err
    assert "nothing was built" in res["explanation"] and res["builds"] == 0
    probes = Store(tmp_path / "st").probes(res["session"])
    assert all(p.details["tier"] == "image" for p in probes)
    found = res["components"]
    assert found["status"] == "found" and found["culprits"] == ["env:DEMO_MODE"]
    n = len(found["components"]) - len(found["unswappable"])
    assert len(found["swaps"]) <= 2 * math.ceil(math.log2(n)) + 2
    md = Path(res["report"]).read_text()
    assert "## Which part of the container" in md and "`env:DEMO_MODE`" in md
    assert "**culprit**" in md


def test_an_image_without_python_is_one_sentence(pair, tmp_path, run_cli):
    client = docker_client()
    commit_image(pair[0], "rm -f /usr/bin/python3*", "bisect-ngc-test/components", "nopython")
    try:
        code, out, err = run_cli(["components", "--from", "bisect-ngc-test/components:nopython",
                                  "--to", pair[1], "--test", "true", "--cache-dir",
                                  tmp_path / "cache"])
    finally:
        client.images.remove("bisect-ngc-test/components:nopython", force=True)
    assert code == 2 and "could not read the components of" in err and "hint:" in err
    code, _, err = run_cli(["components", "--from", "no/such-image:1", "--to", pair[1],
                            "--test", "true", "--cache-dir", tmp_path / "cache"])
    assert code == 2 and "is not on this Docker engine" in err


def swap_rows(tmp_path) -> dict[str, str]:
    """The swap log's rows: key -> outcome (plain runs left out)."""
    import sqlite3
    path = tmp_path / "cache" / "components" / "swaps.sqlite"
    if not path.exists():
        return {}
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT key, outcome FROM swaps").fetchall()
    return {k: v for k, v in rows if not k.startswith("plain:")}


def stored_swaps(tmp_path) -> int:
    try:
        return len(swap_rows(tmp_path))
    except Exception:      # noqa: BLE001 - the writer may hold the file for a moment
        return 0


def test_a_killed_attribution_resumes_without_repeating_a_swap(pair, tmp_path):
    import signal
    import subprocess
    import sys
    import time
    args = [sys.executable, "-m", "bisect_ngc", "components", "--from", pair[0], "--to",
            pair[1], "--test", 'sleep 0.5; test "$DEMO_MODE" = old', "--cache-dir",
            str(tmp_path / "cache")]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 120
    while stored_swaps(tmp_path) < 2:
        assert time.monotonic() < end and proc.poll() is None, proc.stderr.read()
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = stored_swaps(tmp_path)
    again = subprocess.run(args + ["--json"], capture_output=True, text=True, timeout=300)
    res = json.loads(again.stdout)
    ran_again = again.stderr.count("'s components (")
    assert res["attribution"]["culprits"] == ["env:DEMO_MODE"]
    assert done_before + ran_again == len(res["swaps"]) + len(res["checks"]), again.stderr


def test_release_mode_goes_on_to_the_commits_when_pytorch_carries_it(pair, tmp_path, run_cli,
                                                                    monkeypatch):
    """Case B of issue 21: the images differ through their PyTorch. One swap says so, the
    build environment reproduces both releases' verdicts at their own commits, and the
    commit bisection names the commit, with builds in the older release's image."""
    from bisect_ngc.core.store import Store
    # Builds leave `out`; an image as it is (or with a swap) answers through its torch.
    test = ('if [ -f "$BISECT_ARTIFACTS/out" ]; then test "$(cat "$BISECT_ARTIFACTS/out")" = '
            'old; else python3 -c "import torch, sys; sys.exit(torch.behaviour != \'a\')"; fi')
    code, res, err, shas = release_bisect(run_cli, pair, tmp_path, monkeypatch, test)
    assert code == 0 and res["first_new"] == shas[23], (res, err)
    probes = Store(tmp_path / "st").probes(res["session"])
    built = [p for p in probes if p.details["tier"] == "build"]
    assert {0, 25} <= {p.idx for p in built}            # both releases' commits, built first
    assert {p.details["environment"]["base"] for p in built} == \
        {"nvcr.io/nvidia/pytorch:90.01-py3"}
    assert swap_rows(tmp_path)[json.dumps(["a", ["py:torch"]])] == "b"   # A with B's torch


def test_swap_containers_a_killed_run_left_are_removed_and_live_ones_kept(monkeypatch):
    from bisect_ngc.backends.docker.engine import DockerContainers
    client = docker_client()
    label = {"bisect-ngc.role": "swap"}
    left = client.containers.create(IMAGE, ["true"], labels=label)
    live = client.containers.run(IMAGE, ["sleep", "60"], labels=label, detach=True)
    try:
        monkeypatch.setattr(DockerContainers, "STALE_AFTER_S", -1.0)
        assert DockerContainers().client is not None       # the sweep runs on first use
        ids = {c.id for c in client.containers.list(all=True, filters={"label":
                                                                       "bisect-ngc.role=swap"})}
        assert left.id not in ids and live.id in ids
    finally:
        live.remove(force=True)
        try:
            left.remove(force=True)
        except Exception:  # noqa: BLE001 - removed by the sweep, as it should be
            pass


def test_a_symptom_leads_the_search_to_what_moved_and_it_costs_fewer_swaps(pair, tmp_path,
                                                                         run_cli):
    """NCCL's version moved in the configs: a hang's usual suspect is swapped first (after
    the swap of everything), A with B's NCCL alone turns it, and the search stays among
    NCCL's two units: 4 swaps where 12 units would cost about 6."""
    test = ('python3 -c "import ctypes, sys; '
            'sys.exit(ctypes.CDLL(\'libnccl.so.2\').ncclMinor() != 21)"')
    argv = ["components", "--from", pair[0], "--to", pair[1], "--test", test, "--json"]
    code, out, err = run_cli(argv + ["--symptom", "hang", "--cache-dir", tmp_path / "led"])
    led = json.loads(out)
    assert code == 0, err
    assert led["attribution"]["culprits"] == ["lib:libnccl"]
    assert led["swaps"][1]["components"] == ["env:NCCL_VERSION", "lib:libnccl"]
    assert swaps(led) <= 4
    code, out, err = run_cli(argv + ["--symptom", "numerics", "--cache-dir", tmp_path / "x"])
    other = json.loads(out)      # no numerics suspect moved: NCCL's units still lead
    assert code == 0 and other["suspects"] == led["suspects"]
    code, out, err = run_cli(argv + ["--symptom", "sleepy", "--cache-dir", tmp_path / "y"])
    assert code == 2 and "sleepy" in err
