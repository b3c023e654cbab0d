"""Configs read from a registry that hands out bearer tokens, as nvcr.io and Docker Hub do:
the bearer registry of scripts/registry-up.sh (the CNCF distribution registry, checking each
token's signature, audience, expiry and scope) and the token service of
tests/lib/token_server.py, which stands in for NGC's (CI cannot reach it)."""
from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
import requests

from tests.lib import token_server
from tests.lib.registry_images import push, registry_up
from tests.lib.token_server import API_KEY, HOST, USER

LOG = Path("/var/log/bisect-ngc-registry-token.log")
PRIVATE, PUBLIC = "bisect-ngc-tokens/pytorch", "public/pytorch"
pytestmark = [pytest.mark.registry, pytest.mark.docker]


def bearer_registry_up() -> bool:
    try:
        answer = requests.get(f"http://{HOST}/v2/", timeout=5)
    except requests.RequestException:
        return False
    return answer.headers.get("Www-Authenticate", "").startswith("Bearer ")


@pytest.fixture(scope="module")
def tokens():
    """The token service, serving while the module's tests run."""
    if not (registry_up() and bearer_registry_up()):
        pytest.skip(f"no bearer registry on {HOST}: run scripts/registry-up.sh (CI does)")
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine
        pytest.skip(f"no Docker engine to build the test images ({exc}): scripts/docker-up.sh")
    # pushed through the basic-auth registry; the bearer one serves the same storage
    for repo in (PRIVATE, PUBLIC):
        for tag, cuda in (("24.09-py3", "12.6.1.006"), ("24.10-py3", "12.6.2.004")):
            push(client, tag, {"CUDA_VERSION": cuda, "NCCL_VERSION": "2.22.3"},
                 repo=f"127.0.0.1:5000/{repo}")
    server = token_server.TokenServer()
    httpd = token_server.serve(server)
    yield server
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def asked(tokens, tmp_path, monkeypatch):
    """A fresh record of token requests, and no login stored yet."""
    tokens.asked.clear()
    tokens.stale_tokens = 0
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    return tokens.asked


def login(tmp_path: Path, user: str = USER, password: str = API_KEY) -> None:
    """What `docker login 127.0.0.1:5001 -u '$oauthtoken'` stores."""
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    (tmp_path / "docker").mkdir(exist_ok=True)
    (tmp_path / "docker" / "config.json").write_text(json.dumps({"auths": {HOST: {"auth": auth}}}))


def blobs_fetched(since: int) -> list[str]:
    with LOG.open() as f:
        f.seek(since)
        return re.findall(r'"GET /v2/[^ ]+/blobs/(sha256:[0-9a-f]{64}) HTTP/[0-9.]+" 200 ',
                          f.read())


def images(repo: str) -> list[str]:
    return [f"{HOST}/{repo}:24.09-py3", f"{HOST}/{repo}:24.10-py3"]


def test_an_ngc_login_gets_one_token_per_repository_and_reads_configs_only(
        asked, tmp_path, run_cli):
    login(tmp_path)
    start = LOG.stat().st_size
    code, out, err = run_cli(["diff", *images(PRIVATE), "--json", "--cache-dir", tmp_path / "c"])
    assert code == 0, err
    answer = json.loads(out)
    assert {r["name"]: (r["a"], r["b"]) for r in answer["differ"]} == {
        "cuda": ("12.6.1.006", "12.6.2.004")}
    assert sorted(blobs_fetched(start)) == sorted([answer["a"]["config"], answer["b"]["config"]])
    assert [(a.user, a.scope, a.granted) for a in asked] == [
        (USER, f"repository:{PRIVATE}:pull", True)]        # the token served both reads


def test_a_public_repository_is_read_with_an_anonymous_token(asked, tmp_path, run_cli):
    code, out, err = run_cli(["diff", *images(PUBLIC), "--json", "--cache-dir", tmp_path / "c"])
    assert code == 0, err
    assert {r["name"] for r in json.loads(out)["differ"]} == {"cuda"}
    assert [(a.user, a.granted) for a in asked] == [(None, True)]


def test_the_tags_of_a_token_registry_refresh_the_catalog(asked, tmp_path, run_cli):
    login(tmp_path)
    code, out, err = run_cli(["releases", "--refresh", "--repository", f"{HOST}/{PRIVATE}",
                              "--json", "--cache-dir", tmp_path / "c"])
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(out)}
    assert (rows["24.09"]["source"], rows["24.09"]["cuda"]) == ("registry", "12.6.1.006")
    assert (rows["24.10"]["source"], rows["24.10"]["cuda"]) == ("registry", "12.6.2.004")


def test_a_token_that_expired_is_renewed_once(asked, tokens, tmp_path, run_cli):
    login(tmp_path)
    tokens.stale_tokens = 1          # the first token the service hands out is already old
    code, _, err = run_cli(["diff", *images(PRIVATE), "--cache-dir", tmp_path / "c"])
    assert code == 0, err
    assert len(asked) == 2


def test_a_refused_api_key_and_a_missing_login_are_one_sentence(asked, tmp_path, run_cli):
    cache = ["--cache-dir", tmp_path / "c"]
    login(tmp_path, password="not-the-key")
    code, _, err = run_cli(["diff", *images(PRIVATE), *cache])
    assert code == 2 and f"{HOST} refused the login" in err and "$oauthtoken" in err, err
    assert "Traceback" not in err and "requires a token" not in err   # oras' own line
    (tmp_path / "docker" / "config.json").unlink()
    code, _, err = run_cli(["diff", *images(PRIVATE), *cache])
    assert code == 2 and "asks for a login to read" in err and "none is stored" in err, err
    assert [a.granted for a in asked][0] is False
