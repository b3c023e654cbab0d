"""`bisect-ngc diff` against a real registry (scripts/registry-up.sh: the CNCF distribution
registry, basic auth on localhost), with images pushed in NGC's layout: their configs are
read, and no layer is ever fetched (the registry's access log says which blobs were)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests

from tests.lib.registry_images import (HOST, PASSWORD, REPO, USER, blobs_fetched as served,
                                       docker_or_skip, push, registry_up, login as set_login)

LOG = Path("/var/log/bisect-ngc-registry.log")
ENV_A = {"CUDA_VERSION": "12.6.1.006", "NCCL_VERSION": "2.22.3", "CUDNN_VERSION": "9.4.0.58",
         "PYTORCH_BUILD_VERSION": "2.5.0a0+b465a5843b", "TRANSFORMER_ENGINE_VERSION": "1.10",
         "TORCH_NCCL_USE_COMM_NONBLOCKING": "0"}
ENV_B = {"CUDA_VERSION": "12.6.2.004", "NCCL_VERSION": "2.22.3", "CUDNN_VERSION": "9.5.0.50",
         "PYTORCH_BUILD_VERSION": "2.5.0a0+e000cf0ad9", "TRANSFORMER_ENGINE_VERSION": "1.11",
         "TORCH_NCCL_USE_COMM_NONBLOCKING": "1"}
pytestmark = [pytest.mark.registry, pytest.mark.docker]


@pytest.fixture(scope="module")
def pushed():
    """Two images in NGC's layout, pushed: (A, B)."""
    if not registry_up():
        pytest.skip(f"no registry on {HOST}: run scripts/registry-up.sh (CI does)")
    client = docker_or_skip()
    # a release whose config states less than the catalog knows (no commit, no TE)
    push(client, "24.11-py3", {"PYTORCH_VERSION": "2.6.0a0", "CUDA_VERSION": "12.6.3.001"})
    return tuple(push(client, tag, env, {"com.nvidia.cudnn.version": env["CUDNN_VERSION"],
                                         "com.nvidia.cuda.version": "9.0"})
                 for tag, env in (("24.09-py3", ENV_A), ("24.10-py3", ENV_B)))


def login(tmp_path, monkeypatch, password=PASSWORD):
    set_login(tmp_path / "docker", password)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))


MANIFESTS = f"http://{HOST}/v2/{REPO.split('/', 1)[1]}/manifests"
INDEX = "application/vnd.oci.image.index.v1+json"


def manifest_entry(tag: str, os_name: str, arch: str) -> dict:
    """An index's entry for REPO:tag's manifest, under the platform given."""
    kind = "application/vnd.docker.distribution.manifest.v2+json"
    got = requests.get(f"{MANIFESTS}/{tag}", headers={"Accept": kind},
                       auth=(USER, PASSWORD), timeout=10)
    return {"mediaType": kind, "size": len(got.content),
            "digest": got.headers["Docker-Content-Digest"],
            "platform": {"os": os_name, "architecture": arch}}


def put_index(tag: str, entries: list[dict], kind: str = INDEX) -> dict:
    """Push an index of these entries as REPO:tag; its own entry (for an index in it)."""
    body = json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": entries})
    put = requests.put(f"{MANIFESTS}/{tag}", data=body, headers={"Content-Type": INDEX},
                       auth=(USER, PASSWORD), timeout=10)
    assert put.status_code == 201, put.text
    return {"mediaType": kind, "size": len(body.encode()),
            "digest": put.headers["Docker-Content-Digest"]}


def blobs_fetched(since: int) -> list[str]:
    return served(LOG, since)


def test_diff_reads_the_two_configs_and_no_layer(pushed, tmp_path, monkeypatch, run_cli):
    login(tmp_path, monkeypatch)
    start = LOG.stat().st_size
    code, out, err = run_cli(["diff", *pushed, "--json", "--cache-dir", tmp_path / "c"])
    assert code == 0, err
    answer = json.loads(out)
    rows = {r["name"]: (r["a"], r["b"]) for r in answer["differ"]}
    assert rows == {"torch": ("2.5.0a0+b465a5843b", "2.5.0a0+e000cf0ad9"),
                    "cuda": ("12.6.1.006", "12.6.2.004"), "cudnn": ("9.4.0.58", "9.5.0.50"),
                    "transformer_engine": ("1.10", "1.11"),
                    "TORCH_NCCL_USE_COMM_NONBLOCKING": ("0", "1")}
    assert sorted(blobs_fetched(start)) == sorted([answer["a"]["config"], answer["b"]["config"]])

    again = LOG.stat().st_size          # configs are cached by digest: no blob at all
    code, text, err = run_cli(["diff", *pushed, "--cache-dir", tmp_path / "c"])
    assert code == 0, err
    assert blobs_fetched(again) == []
    assert "cudnn" in text and "9.4.0.58" in text and "nccl" not in text


def test_a_refused_login_a_missing_login_a_missing_tag_and_a_down_registry_are_one_sentence(
        pushed, tmp_path, monkeypatch, run_cli):
    cache = ["--cache-dir", tmp_path / "c"]
    login(tmp_path, monkeypatch, password="wrong")
    code, _, err = run_cli(["diff", *pushed, *cache])
    assert code == 2 and "refused the login" in err and "docker login" in err, err
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "nowhere"))
    code, _, err = run_cli(["diff", *pushed, *cache])
    assert code == 2 and "asks for a login and none is stored" in err, err
    login(tmp_path, monkeypatch)
    code, _, err = run_cli(["diff", pushed[0], f"{REPO}:99.99-py3", *cache])
    assert code == 2 and "is not in 127.0.0.1:5000 (no such repository or tag)" in err, err
    code, _, err = run_cli(["diff", pushed[0], "127.0.0.1:5999/x/y:1", *cache])
    assert code == 2 and "cannot reach the registry 127.0.0.1:5999" in err, err
    assert "Traceback" not in err


def test_a_multi_platform_tag_is_read_for_the_asked_platform(pushed, tmp_path, monkeypatch,
                                                              run_cli):
    login(tmp_path, monkeypatch)
    put_index("multi", [manifest_entry("24.09-py3", "linux", "arm64"),
                        manifest_entry("24.09-py3", "linux", "amd64")])
    code, out, err = run_cli(["diff", f"{REPO}:multi", pushed[1], "--json",
                              "--cache-dir", tmp_path / "c"])
    assert code == 0, err
    assert {r["name"] for r in json.loads(out)["differ"]} >= {"torch", "cuda"}
    code, _, err = run_cli(["diff", f"{REPO}:multi", pushed[1], "--platform", "linux/s390x",
                            "--cache-dir", tmp_path / "c"])
    assert code == 2 and "has no linux/s390x image (it has linux/amd64, linux/arm64)" in err, err


def test_refresh_reads_every_release_tag_into_the_overlay(pushed, tmp_path, monkeypatch,
                                                          run_cli):
    """releases --refresh: each YY.MM-py3 tag's config, no layer, into the overlay; a full
    commit the catalog has stays where the config's short one is its prefix."""
    login(tmp_path, monkeypatch)
    start = LOG.stat().st_size
    cache = ["--cache-dir", tmp_path / "c"]
    code, out, err = run_cli(["releases", "--refresh", "--repository", REPO, "--json", *cache])
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(out)}
    for name, env in (("24.09", ENV_A), ("24.10", ENV_B)):
        row = rows[name]
        assert (row["source"], row["image"]) == ("registry", f"nvcr.io/nvidia/pytorch:{name}-py3")
        assert (row["torch_version"], row["cuda"], row["cudnn"], row["nccl"],
                row["transformer_engine"]) == (
            env["PYTORCH_BUILD_VERSION"], env["CUDA_VERSION"], env["CUDNN_VERSION"],
            env["NCCL_VERSION"], env["TRANSFORMER_ENGINE_VERSION"])
    assert rows["24.09"]["torch_commit"].startswith("b465a5843b")
    assert len(rows["24.09"]["torch_commit"]) == 40         # the catalog's full sha stays
    assert rows["24.09"]["python"] == "3.10.12"             # configs do not say; kept
    assert rows["24.01"]["source"] == "catalog"             # no such tag here: untouched
    vague = rows["24.11"]                                   # says less: nothing is lost
    assert (vague["cuda"], vague["torch_version"], vague["transformer_engine"]) == (
        "12.6.3.001", "2.6.0a0+df5bbc09d1", "1.12")
    assert vague["torch_commit"].startswith("df5bbc0")
    assert len(blobs_fetched(start)) == 3                   # the three configs, no layer
    code, text, _ = run_cli(["releases", *cache])           # the overlay, and its columns
    assert code == 0 and "cuDNN" in text and "9.5.0.50" in text


def test_a_bad_cache_file_is_read_again_and_a_nested_index_is_one_sentence(
        pushed, tmp_path, monkeypatch, run_cli):
    login(tmp_path, monkeypatch)
    cache = ["--cache-dir", tmp_path / "c"]
    code, out, _ = run_cli(["diff", *pushed, "--json", *cache])
    digest = json.loads(out)["a"]["config"]
    kept = tmp_path / "c" / "image-configs" / f"{digest.replace(':', '-')}.json"
    kept.write_text('{"config": {"Env": ["CUDA_VERSION=99"]}}')      # not what the digest says
    start = LOG.stat().st_size
    code, out, err = run_cli(["diff", *pushed, "--json", *cache])
    assert code == 0, err
    assert {r["name"]: r["a"] for r in json.loads(out)["differ"]}["cuda"] == "12.6.1.006"
    assert blobs_fetched(start) == [digest]              # read again, from the registry
    kind = "application/vnd.oci.image.index.v1+json"
    inner = put_index("inner", [manifest_entry("24.09-py3", "linux", "amd64")])
    put_index("nested", [dict(inner, platform={"os": "linux", "architecture": "amd64"})], kind)
    code, out, err = run_cli(["diff", f"{REPO}:nested", pushed[1], "--json", *cache])
    assert code == 2 and "names no image config" in json.loads(out)["message"], out


def test_a_tag_list_never_sends_the_login_to_another_host():
    from bisect_ngc.errors import UserError
    from bisect_ngc.images.registry import Registry
    ref = Registry.reference(f"{HOST}/r:latest")
    assert Registry._next_page(ref, "/v2/r/tags/list?last=x") == f"{HOST}/v2/r/tags/list?last=x"
    assert Registry._next_page(ref, "list?last=y") == f"{HOST}/v2/r/tags/list?last=y"
    assert Registry._next_page(ref, f"{HOST}/v2/r/tags/list?last=z") == \
        f"{HOST}/v2/r/tags/list?last=z"                    # named without its scheme
    nvcr = Registry.reference("nvcr.io/nvidia/pytorch:latest")
    assert Registry._next_page(nvcr, "https://NVCR.IO:443/v2/nvidia/pytorch/tags/list?n=9") \
        == "nvcr.io/v2/nvidia/pytorch/tags/list?n=9"
    assert Registry._next_page(ref, f"http://{HOST}/v2/r/tags/list?n=2") == \
        f"{HOST}/v2/r/tags/list?n=2"
    with pytest.raises(UserError, match="another host"):
        Registry._next_page(ref, "http://127.0.0.1:5107/v2/r/tags/list")
