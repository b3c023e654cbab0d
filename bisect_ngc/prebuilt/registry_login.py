"""The login of registry.py: the one config `docker login` wrote, Docker Hub's names, and
what went wrong when a registry or its token service turned a read away, in one sentence."""
from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import UserError

HUB_NAMES = ("docker.io", "index.docker.io")
HUB_API = "registry-1.docker.io"             # where Docker Hub's registry API answers
HUB_LOGIN = "https://index.docker.io/v1/"    # where `docker login` keeps Docker Hub's login


def docker_config() -> Path:
    return Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "config.json"


def api_host(host: str) -> str:
    return HUB_API if host in HUB_NAMES else host


def login_config() -> dict[str, Any]:
    """oras' login table from the one config file that counts ($DOCKER_CONFIG, else
    ~/.docker; oras alone would merge both in no fixed order), Docker Hub's login under
    its API host."""
    path = docker_config()
    data: Any = {}
    if path.is_file():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = None
    if not isinstance(data, dict) or not all(
            isinstance(data.get(k) or {}, dict) for k in ("auths", "credHelpers")):
        raise UserError(f"{path} cannot be read as docker login's config",
                        hint="fix it, or move it away and `docker login` again")
    auths, helpers = dict(data.get("auths") or {}), dict(data.get("credHelpers") or {})
    for table in (auths, helpers):
        for name in (HUB_LOGIN, *HUB_NAMES):
            if name in table:
                table.setdefault(HUB_API, table[name])
    return {"auths": auths, "credsStore": data.get("credsStore"), "credHelpers": helpers}


def quiet_oras() -> None:
    """oras logs a refused token as an error of its own; the user gets ours instead."""
    log = logging.getLogger("oras.logger")
    if not any(getattr(f, "bisect_ngc", False) for f in log.filters):
        def drop(record: logging.LogRecord) -> bool:
            return "requires a token" not in record.getMessage()
        drop.bisect_ngc = True  # type: ignore[attr-defined]
        log.addFilter(drop)


def logged_in(client: Any) -> bool:
    return bool(getattr(client.auth, "_basic_auth", None))


def login_step_failed(client: Any, host: str, image: str, seen: list[Any]) -> UserError:
    """oras could not get a token: the token service's last answer says why."""
    realm = next((r for r in reversed(seen) if urlsplit(r.url).netloc != host), None)
    if realm is None or realm.status_code in (401, 403):
        return refused(client, host, image, realm.status_code if realm is not None else 401)
    where = urlsplit(realm.url).netloc
    if realm.status_code == 200:
        return UserError(f"the token service of {host} ({where}) answered something that "
                         f"is not a token, for {image}",
                         hint="a proxy or a login page may stand in the way; try again later")
    return UserError(f"the token service of {host} ({where}) answered {realm.status_code} "
                     f"for {image}", hint="try again later; your login was not refused")


def unreachable(host: str, image: str, exc: Exception) -> UserError:
    url = getattr(getattr(exc, "request", None), "url", None) or ""
    where = urlsplit(url).netloc
    if where and where != host:
        return UserError(f"cannot reach the token service of {host} ({where}) for {image}: "
                         f"{type(exc).__name__}",
                         hint="check the network (a proxy, a VPN); nothing was pulled")
    return UserError(f"could not read {image} from {host}: {type(exc).__name__}",
                     hint=f"check the name, the network and your login (docker login {host})")


def refused(client: Any, host: str, image: str, status: int, challenge: str = "") -> UserError:
    """A read turned away: no login, a login refused, or a token the registry would not
    take (the `error=` of its challenge)."""
    hint = (f"log in with `docker login {host}` (NGC: user $oauthtoken, your API key as the "
            "password)")
    error = (re.search(r'error="([^"]+)"', challenge) or [None, ""])[1]
    if not logged_in(client):
        return UserError(f"{host} asks for a login to read {image}, and none is stored",
                         hint=hint)
    if error == "insufficient_scope":
        return UserError(f"your login to {host} has no access to {image} "
                         "(insufficient_scope)", hint="check that your key's org or team may "
                                                      "pull it, or log in as one that may")
    if error == "invalid_token":
        return UserError(f"{host} did not accept the token its token service gave for "
                         f"{image} (invalid_token)", hint="try again later")
    return UserError(f"{host} refused the login for {image} ({status})", hint=hint)
