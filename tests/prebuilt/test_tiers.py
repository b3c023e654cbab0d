"""Prebuilt tiers on the real Docker engine: NGC images as they are (local images tagged
with catalog names), and nightly wheels served by a PEP 503 index on 127.0.0.1."""
from __future__ import annotations

import functools
import http.server
import json
import math
import shlex
import subprocess
import threading
from pathlib import Path

import pytest

from tests.lib.repos import make_repo
from tests.lib.repos import catalog
from bisect_ngc.core.store import Store
from bisect_ngc.prebuilt.tiers import parse_index

from tests.lib.docker_engine import IMAGE, PROBLEM, commit_image, docker_client

pytestmark = [pytest.mark.docker, pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")]

AS_IS_TEST = 'test "$(cat behaviour)" = old'   # reads the checked-out commit, as an image would




@pytest.fixture
def releases(tmp_path, monkeypatch):
    """A generated 'pytorch' with five releases, each image a tag of the test image."""
    shas = make_repo(tmp_path / "pytorch", 120, 70)
    rows = [("90.01", shas[10]), ("90.02", shas[40]), ("90.03", shas[60]),
            ("90.04", shas[90]), ("90.05", shas[110])]
    monkeypatch.setenv("BISECT_NGC_CATALOG", str(catalog(tmp_path, rows)))
    client = docker_client()
    for name, _ in rows:     # each image says which release it is: builds show where they ran
        commit_image(IMAGE, f"echo {name} > /etc/base-marker", "nvcr.io/nvidia/pytorch",
                     f"{name}-py3")
    yield tmp_path / "pytorch", shas
    for name, _ in rows:
        client.images.remove(f"nvcr.io/nvidia/pytorch:{name}-py3", force=True)


def release_args(repo, tmp_path, frm, to, *extra):
    build = 'cp behaviour "$BISECT_ARTIFACTS/out"; cp /etc/base-marker "$BISECT_ARTIFACTS/" ' \
            '2>/dev/null || true'
    return ["bisect", "--from", frm, "--to", to, "--torch-repo", repo, "--backend", "docker",
            "--build", build, "--test", AS_IS_TEST,
            "--no-nightlies", "--gpus", "none", "--state", tmp_path / "st", "--cache-dir",
            tmp_path / "cache",
            "--quiet", "--json", *extra]


def test_the_image_tier_picks_the_adjacent_releases_with_no_build(releases, tmp_path, run_cli):
    repo, shas = releases
    code, out, err = run_cli(release_args(repo, tmp_path, "90.01", "90.05"))
    assert code == 0, err
    res = json.loads(out)
    assert res["first_new"] == shas[70]
    probes = Store(tmp_path / "st").probes(res["session"])
    images = [p for p in probes if p.details["tier"] == "image"]
    builds = [p for p in probes if p.details["tier"] == "build"]
    # the endpoints, then a bisection of the releases down to the adjacent pair 90.03/90.04
    assert {"NGC 90.01", "NGC 90.03", "NGC 90.04", "NGC 90.05"} <= \
        {p.details["source"] for p in images}
    assert all(p.build_s is None for p in images)
    # The build environment first reproduces the two releases' verdicts at their own
    # commits (the evidence rule), then builds bisect between them.
    assert {50, 80} <= {p.idx for p in builds} <= set(range(50, 81))   # 90.03 .. 90.04
    assert len(builds) <= math.ceil(math.log2(30)) + 2
    assert res["prebuilt"] == len(images)
    answer = {p.idx: p for p in probes if p.details["tier"] != "image"}
    assert answer[59].verdict.value == "pass" and answer[60].verdict.value == "fail"
    # Case E: the builds ran in the older of the two adjacent releases, not in --from's.
    assert {p.details["environment"]["base"] for p in builds} == {"nvcr.io/nvidia/pytorch:90.03-py3"}
    markers = {m.read_text().strip()
               for m in (tmp_path / "cache" / "artifacts").glob("*/base-marker")}
    assert markers == {"90.03"}
    evidence = Path(res["report"]).read_text().split("## Evidence")[1].split("## Probes")[0]
    assert evidence.count("the commit's build in `nvcr.io/nvidia/pytorch:90.03-py3`") == 2


def test_releases_that_behave_alike_stop_before_any_build(releases, tmp_path, run_cli):
    repo, shas = releases
    code, out, err = run_cli(release_args(repo, tmp_path, "90.01", "90.02"))
    res = json.loads(out)
    assert code == 3 and res["status"] == "invalid-endpoints"
    assert "NGC 90.01: pass; NGC 90.02: pass; nothing was built" in res["explanation"]
    probes = Store(tmp_path / "st").probes(res["session"])
    assert len(probes) == 2 and all(p.details["tier"] == "image" for p in probes)
    assert not (tmp_path / "cache" / "artifacts").exists() or \
        not list((tmp_path / "cache" / "artifacts").glob("[!.]*"))


# --- nightlies ------------------------------------------------------------------------

MKWHEEL = '''import os, sys, zipfile
out, commit = sys.argv[1], sys.argv[2]
behaviour = open("behaviour").read().strip()
date = sys.argv[3] if len(sys.argv) > 3 else "20240101"
name = f"fakepkg-1.0.0.dev{date}-py3-none-any.whl"
with zipfile.ZipFile(os.path.join(out, name), "w") as z:
    z.writestr("fakepkg/__init__.py", f"behaviour = {behaviour!r}\\n")
    z.writestr("fakepkg/version.py", f"git_version = {commit!r}\\n")
    z.writestr("fakepkg-1.0.0.dist-info/METADATA",
               "Metadata-Version: 2.1\\nName: fakepkg\\nVersion: 1.0.0\\n")
    z.writestr("fakepkg-1.0.0.dist-info/WHEEL",
               "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
    z.writestr("fakepkg-1.0.0.dist-info/RECORD", "")
'''
WHEEL_BUILD = f'python3 -c {shlex.quote(MKWHEEL)} "$BISECT_ARTIFACTS" "$BISECT_COMMIT"'
WHEEL_TEST = ('python3 -m pip install -q --no-index --no-deps --target /tmp/site '
              '"$BISECT_ARTIFACTS"/*.whl >&2 && PYTHONPATH=/tmp/site python3 -c "'
              'import fakepkg, fakepkg.version as v, json, sys; '
              'print(json.dumps({\'torch_git_version\': v.git_version})); '
              'sys.exit(fakepkg.behaviour != \'old\')"')


@pytest.fixture
def nightlies(tmp_path, monkeypatch, request):
    """60 commits (first new at 37), a nightly every 10 commits on a `nightly` branch, and
    an HTTP index of their wheels; the wheel of day `request.param`, if any, reports a
    commit it is not."""
    wrong_day = getattr(request, "param", None)
    repo = tmp_path / "pytorch"
    shas = make_repo(repo, 60, 37)
    subprocess.run(["git", "-C", repo, "checkout", "-q", "--orphan", "nightly"], check=True)
    subprocess.run(["git", "-C", repo, "rm", "-rfq", "."], check=True)
    served = tmp_path / "index"
    served.mkdir()
    (served / "mkwheel.py").write_text(MKWHEEL)
    links = []
    for day, idx in enumerate((5, 15, 25, 35, 45, 55), start=1):
        date = f"2024-01-{day:02d}"
        subprocess.run(["git", "-C", repo, "commit", "-q", "--allow-empty", "-m",
                        f"{date} nightly release ({shas[idx]})"], check=True)
        subprocess.run(["git", "-C", repo, "checkout", "-q", shas[idx], "--", "behaviour"],
                       check=True)
        reported = shas[idx] if day != wrong_day else shas[idx - 1]
        subprocess.run(["python3", served / "mkwheel.py", served, reported,
                        f"202401{day:02d}"], cwd=repo, check=True)
        name = f"fakepkg-1.0.0.dev202401{day:02d}-py3-none-any.whl"
        links.append(f'<a href="{name}#sha256=0">{name}</a>')
    subprocess.run(["git", "-C", repo, "checkout", "-q", "-f", "main"], check=True)
    (served / "index.html").write_text("<html><body>" + "<br>".join(links) + "</body></html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("BISECT_NGC_CATALOG", str(catalog(tmp_path, [("90.01", shas[0]),
                                                                    ("90.02", shas[59])])))
    docker_client().images.get(IMAGE).tag("nvcr.io/nvidia/pytorch:90.01-py3")
    yield repo, shas, f"http://127.0.0.1:{server.server_port}/index.html", served
    server.shutdown()
    docker_client().images.remove("nvcr.io/nvidia/pytorch:90.01-py3")


def nightly_args(repo, tmp_path, state, index, *extra):
    return ["bisect", "--from", "90.01", "--to", "90.02", "--torch-repo", repo, "--backend",
            "docker", "--build", WHEEL_BUILD, "--test", WHEEL_TEST, "--check-torch-commit",
            "--no-images", "--gpus", "none", "--state", tmp_path / state, "--cache-dir",
            tmp_path / "cache", "--quiet", "--json",
            "--nightly-index", index, *extra]


def test_nightlies_answer_like_builds_with_a_few_builds(nightlies, tmp_path, run_cli):
    repo, shas, index, _ = nightlies
    code, out, err = run_cli(nightly_args(repo, tmp_path, "st", index))
    assert code == 0, err
    res = json.loads(out)
    probes = Store(tmp_path / "st").probes(res["session"])
    tiers = {p.commit: p.details["tier"] for p in probes}
    builds = [c for c, t in tiers.items() if t == "build"]
    assert "nightly" in tiers.values()
    assert len(builds) <= math.ceil(math.log2(10)) + 2            # between two nightlies
    assert set(builds) - {shas[0], shas[59]} <= set(shas[36:45])
    code, out, err = run_cli(nightly_args(repo, tmp_path, "builds-only", index,
                                          "--no-nightlies"))
    assert code == 0, err
    assert json.loads(out)["first_new"] == res["first_new"] == shas[37]


@pytest.mark.parametrize("nightlies", [4], indirect=True)
def test_a_wheel_that_reports_another_commit_is_a_skip(nightlies, tmp_path, run_cli):
    repo, shas, index, _ = nightlies
    code, out, err = run_cli(nightly_args(repo, tmp_path, "st", index))
    assert code == 0, err
    res = json.loads(out)
    assert res["first_new"] == shas[37]
    wrong = [p for p in Store(tmp_path / "st").probes(res["session"])
             if p.commit == shas[35] and p.details["tier"] == "nightly"]
    assert wrong and wrong[0].verdict.value == "skip"
    assert wrong[0].reason == (f"the container reports torch git version {shas[34]}, not the "
                               f"probed commit {shas[35][:12]}")


def test_an_unreachable_index_is_one_line_and_the_builds_go_on(nightlies, tmp_path, run_cli):
    repo, shas, _, _ = nightlies
    code, out, err = run_cli(nightly_args(repo, tmp_path, "st", "http://127.0.0.1:9/simple/"))
    assert code == 0 and json.loads(out)["first_new"] == shas[37]
    assert err.count("going on without nightlies") == 1 and "Traceback" not in err


def test_index_pages_are_parsed_leniently():
    page = ('<a href="w/t-2.6.0.dev20240901+cu126-cp310-cp310-linux_x86_64.whl">'
            't-2.6.0.dev20240901+cu126-cp310-cp310-linux_x86_64.whl</a>'
            '<a href="t-2.6.0.dev20240901+cu126-cp311-cp311-linux_x86_64.whl">'
            't-2.6.0.dev20240901+cu126-cp311-cp311-linux_x86_64.whl</a>'
            '<a href="t-2.6.0.dev20240902-cp310-cp310-macosx_11_0_arm64.whl">mac</a>'
            '<a href="x">not a wheel</a><p>garbage <<< >>>')
    found = parse_index(page, "https://h/simple/t/", "3.10")
    assert [(n.date, n.url) for n in found] == [
        ("2024-09-01", "https://h/simple/t/w/t-2.6.0.dev20240901+cu126-cp310-cp310-"
                       "linux_x86_64.whl")]
    assert parse_index("\x00\x01 not html at all", "https://h/", None) == []


# --- the evidence rule (issue 21): images differ outside PyTorch ------------------------

MARKED_TEST = 'test ! -e /etc/ngc-marker && test "$(cat behaviour)" = old'


@pytest.fixture
def marked_release(tmp_path, monkeypatch):
    """Two releases whose PyTorch commits behave alike; the newer image carries a file
    outside PyTorch that makes the test fail, as another component of an image would."""
    shas = make_repo(tmp_path / "pytorch", 60, 59)      # every commit in range: old
    rows = [("90.01", shas[10]), ("90.02", shas[40])]
    monkeypatch.setenv("BISECT_NGC_CATALOG", str(catalog(tmp_path, rows)))
    client = docker_client()
    client.images.get(IMAGE).tag("nvcr.io/nvidia/pytorch:90.01-py3")
    commit_image(IMAGE, "touch /etc/ngc-marker", "nvcr.io/nvidia/pytorch", "90.02-py3")
    yield tmp_path / "pytorch", shas
    for name in ("90.01", "90.02"):
        client.images.remove(f"nvcr.io/nvidia/pytorch:{name}-py3", force=True)


def test_images_that_differ_outside_pytorch_name_no_commit(marked_release, tmp_path, run_cli):
    repo, shas = marked_release
    args = release_args(repo, tmp_path, "90.01", "90.02")
    args[args.index("--test") + 1] = MARKED_TEST
    code, out, err = run_cli(args)
    res = json.loads(out)
    assert code == 5 and res["status"] == "not-in-commits", (code, res, err)
    assert res["first_new"] is None
    assert "NGC 90.02 behaves fail, but PyTorch at its commit" in res["explanation"]
    probes = Store(tmp_path / "st").probes(res["session"])
    built = [p for p in probes if p.details["tier"] != "image"]
    assert {p.commit for p in built} <= {shas[10], shas[40]} and len(built) <= 2
    md = Path(res["report"]).read_text()
    assert "Not in these commits" in md and "introduced by" not in md
