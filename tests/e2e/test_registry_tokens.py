"""Configs read from a registry that hands out bearer tokens, as nvcr.io and Docker Hub do:
the bearer registry of scripts/registry-up.sh (the CNCF distribution registry, checking each
token's signature, audience, expiry and scope) and the token service of
tests/lib/token_server.py, which stands in for NGC's (CI cannot reach it)."""
from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
import requests

from tests.lib import token_server
from tests.lib.registry_images import (blobs_fetched as served, docker_or_skip,
                                       login as save_login, push, registry_up)
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
    client = docker_or_skip()
    # pushed through the basic-auth registry; the bearer one serves the same storage
    for repo in (PRIVATE, PUBLIC):
        for tag, cuda in (("24.09-py3", "12.6.1.006"), ("24.10-py3", "12.6.2.004")):
            push(client, tag, {"CUDA_VERSION": cuda, "NCCL_VERSION": "2.22.3"},
                 repo=f"127.0.0.1:5000/{repo}")
    server = token_server.TokenServer()
    server.httpd = token_server.serve(server)     # a test may stop it and serve it again
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.fixture
def asked(tokens, tmp_path, monkeypatch):
    """A fresh record of token requests, and no login stored yet."""
    tokens.asked.clear()
    tokens.stale_tokens, tokens.fail_with = 0, 0
    tokens.no_token = tokens.other_scope = False
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    return tokens.asked


def login(tmp_path: Path, user: str = USER, password: str = API_KEY) -> None:
    """What `docker login 127.0.0.1:5001 -u '$oauthtoken'` stores."""
    save_login(tmp_path / "docker", password, user, HOST)


def blobs_fetched(since: int) -> list[str]:
    return served(LOG, since)


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


def test_what_went_wrong_with_a_token_is_told_apart(asked, tokens, tmp_path, run_cli):
    """An outage is no refused login: each failure its own sentence, with the realm named."""
    login(tmp_path)
    cache = ["--cache-dir", tmp_path / "c"]
    for setting, value, words in (
            ("fail_with", 503, "the token service of 127.0.0.1:5001 (127.0.0.1:5002) answered 503"),
            ("no_token", True, "answered something that is not a token"),
            ("other_scope", True, "your login to 127.0.0.1:5001 has no access to"),
            ("stale_tokens", 99, "did not accept the token its token service gave")):
        setattr(tokens, setting, value)
        code, _, err = run_cli(["diff", *images(PRIVATE), *cache])
        setattr(tokens, setting, type(value)())
        assert code == 2 and words in err and "Traceback" not in err, (setting, err)
        assert "refused the login" not in err
    tokens.httpd.shutdown()
    tokens.httpd.server_close()
    try:
        code, _, err = run_cli(["diff", *images(PRIVATE), *cache])
    finally:
        tokens.httpd = token_server.serve(tokens)
    assert code == 2 and "cannot reach the token service of 127.0.0.1:5001 (127.0.0.1:5002)" \
        in err, err


def test_only_the_config_docker_login_uses_counts(asked, tmp_path, monkeypatch, run_cli):
    """$DOCKER_CONFIG stands in for ~/.docker as it does for docker: a stale key in the
    home directory never takes the place of the right one, nor fills in for none."""
    home = tmp_path / "home"
    (home / ".docker").mkdir(parents=True)
    stale = base64.b64encode(f"{USER}:an-old-key".encode()).decode()
    (home / ".docker" / "config.json").write_text(json.dumps({"auths": {HOST: {"auth": stale}}}))
    monkeypatch.setenv("HOME", str(home))
    login(tmp_path)
    cache = ["--cache-dir", tmp_path / "c"]
    for _ in range(3):
        code, _, err = run_cli(["diff", *images(PRIVATE), *cache])
        assert code == 0, err
    (tmp_path / "docker" / "config.json").write_text(json.dumps({"auths": {}}))
    code, _, err = run_cli(["diff", *images(PRIVATE), *cache])
    assert code == 2 and "none is stored" in err, err
    (tmp_path / "docker" / "config.json").write_text("{not json")
    code, _, err = run_cli(["diff", *images(PRIVATE), *cache])
    assert code == 2 and "cannot be read as docker login's config" in err, err
    assert "Traceback" not in err


def test_docker_hub_is_read_where_its_api_answers_with_the_login_docker_keeps(
        tmp_path, monkeypatch):
    from bisect_ngc.images.registry import Registry
    from bisect_ngc.images.registry_login import login_config
    assert Registry.reference("docker.io/library/ubuntu:22.04").registry == \
        "registry-1.docker.io"
    assert Registry.reference("index.docker.io/me/private:1").manifest_url().startswith(
        "registry-1.docker.io/v2/me/private/manifests/")
    (tmp_path / "config.json").write_text(json.dumps(
        {"auths": {"https://index.docker.io/v1/": {"auth": "bWU6cGF0"}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    assert login_config()["auths"]["registry-1.docker.io"] == {"auth": "bWU6cGF0"}


def answer(url: str, status: int, challenge: str = "") -> requests.Response:
    """A registry's or token service's answer, as the client's response hook saw it."""
    got = requests.Response()
    got.url, got.status_code = url, status
    if challenge:
        got.headers["Www-Authenticate"] = challenge
    return got


def test_a_token_service_on_the_registry_s_own_host_is_told_from_the_registry():
    """As ghcr.io, quay.io and Harbor serve it: the realm is known by its URL, not its host;
    an answer from elsewhere (storage a read was sent to) is no token service's."""
    from types import SimpleNamespace
    from bisect_ngc.images.registry_login import login_step_failed, refused, unreachable
    client = SimpleNamespace(auth=SimpleNamespace(_basic_auth="dTpw"))
    challenge = 'Bearer realm="https://r.io/token",service="r.io"'
    first = answer("https://r.io/v2/a/b/manifests/1", 401, challenge)
    for status, words in ((503, "the token service of r.io (r.io) answered 503"),
                          (200, "answered something that is not a token"),
                          (401, "r.io refused the login")):
        seen = [first, answer("https://r.io/token?service=r.io&scope=x", status)]
        assert words in str(login_step_failed(client, "r.io", "r.io/a/b:1", seen))
    proxy = answer("https://r.io/v2/a/b/manifests/1", 403)          # no challenge at all
    assert "refused the login for r.io/a/b:1 (403)" in str(
        login_step_failed(client, "r.io", "r.io/a/b:1", [proxy]))
    anonymous = SimpleNamespace(auth=SimpleNamespace())
    assert "(invalid_token)" in str(refused(anonymous, "r.io", "r.io/a/b:1", 401,
                                            'Bearer realm="x",error="invalid_token"'))
    down = requests.ConnectionError(
        request=requests.Request("GET", "https://s3.example/b").prepare())
    assert "cannot reach the storage s3.example that r.io sent" in str(
        unreachable("r.io", "r.io/a/b:1", down, [first]))
    realm_down = requests.ConnectionError(
        request=requests.Request("GET", "https://r.io/token?scope=x").prepare())
    assert "cannot reach the token service of r.io (r.io)" in str(
        unreachable("r.io", "r.io/a/b:1", realm_down, [first]))


def test_a_docker_hub_login_in_a_credential_store_is_asked_where_docker_keeps_it(
        tmp_path, monkeypatch):
    import oras.provider
    from bisect_ngc.images.registry import Registry
    from bisect_ngc.images.registry_login import load_login, logged_in
    helper = tmp_path / "bin" / "docker-credential-t"
    helper.parent.mkdir()
    helper.write_text('#!/bin/bash\nread host; echo "$host" >> "$(dirname "$0")/asked"\n'
                      'if [ "$host" = https://index.docker.io/v1/ ]; then\n'
                      '  echo \'{"Username": "me", "Secret": "pat"}\'; exit 0; fi\n'
                      'echo "credentials not found in native keychain"; exit 1\n')
    helper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{helper.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    for config in ({"credsStore": "t"}, {"credHelpers": {"https://index.docker.io/v1/": "t"}}):
        (tmp_path / "config.json").write_text(json.dumps(config))
        ref = Registry.reference("docker.io/me/private:1")
        client = oras.provider.Registry(ref.registry, auth_backend="token")
        load_login(client, ref)
        assert logged_in(client), config
    assert "https://index.docker.io/v1/" in (helper.parent / "asked").read_text()
    assert Registry.reference("docker.io/ubuntu:22.04").manifest_url() == \
        "registry-1.docker.io/v2/library/ubuntu/manifests/22.04"
