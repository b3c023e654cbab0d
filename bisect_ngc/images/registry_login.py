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
from . import oras_seam

HUB_NAMES = ("docker.io", "index.docker.io")
HUB_API = "registry-1.docker.io"             # where Docker Hub's registry API answers
HUB_LOGIN = "https://index.docker.io/v1/"    # where `docker login` keeps Docker Hub's login


def docker_config() -> Path:
    return Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "config.json"


def api_name(image: str, host: str) -> str:
    """The image as the registry's API knows it: Docker Hub's on its API host, a one-part
    name of it under library/ (docker.io/ubuntu is docker.io/library/ubuntu)."""
    if host not in HUB_NAMES:
        return image
    rest = image[len(host) + 1:]
    path = re.split(r"[:@]", rest, maxsplit=1)[0]
    return f"{HUB_API}/{'library/' if '/' not in path else ''}{rest}"


def same_host(url: Any, host: str) -> bool:
    """Whether a split URL is on host[:port] (case aside, a default port spelled out)."""
    name, _, port = host.lower().partition(":")
    default = {"http": 80, "https": 443}.get(url.scheme)
    return (url.hostname or "") == name and (url.port or default) == (int(port) if port
                                                                     else default)


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
    for name in (HUB_LOGIN, *HUB_NAMES):     # a helper is asked under HUB_LOGIN (registry.py)
        if name in auths and (auths[name] or {}).get("auth"):
            auths.setdefault(HUB_API, auths[name])
    return {"auths": auths, "credsStore": data.get("credsStore"), "credHelpers": helpers}


def load_login(client: Any, ref: Any) -> None:
    """The client's login for ref's registry, as `docker login` stored it."""
    oras_seam.set_logins(client, login_config())
    try:
        client.auth.load_configs(ref)
        if ref.registry == HUB_API and not logged_in(client):
            oras_seam.load_login(client, HUB_LOGIN)   # where `docker login` keeps Hub's
    except (KeyError, ValueError, AttributeError, TypeError):
        raise UserError(f"the login for {ref.registry} in {docker_config()} cannot be read",
                        hint=f"log in again with `docker login {ref.registry}`") from None


def quiet_oras() -> None:
    """oras logs a refused token as an error of its own; the user gets ours instead."""
    log = logging.getLogger("oras.logger")
    if not any(getattr(f, "bisect_ngc", False) for f in log.filters):
        def drop(record: logging.LogRecord) -> bool:
            return "requires a token" not in record.getMessage()
        drop.bisect_ngc = True  # type: ignore[attr-defined]
        log.addFilter(drop)


def logged_in(client: Any) -> bool:
    return oras_seam.has_login(client)


def realm_of(seen: list[Any]) -> str:
    """The token service's URL, from the registry's challenge among these answers."""
    for answer in seen:
        found = re.search(r'realm="([^"]+)"', answer.headers.get("Www-Authenticate", ""))
        if found:
            return found.group(1)
    return ""


def login_step_failed(client: Any, host: str, image: str, seen: list[Any]) -> UserError:
    """oras could not get a token: the token service's last answer says why."""
    realm_url = realm_of(seen)
    realm = next((r for r in reversed(seen)
                  if realm_url and r.url.split("?", 1)[0] == realm_url), None)
    if realm is None:                    # turned away with no token service to ask
        last = seen[-1] if seen else None
        return refused(client, host, image, last.status_code if last is not None else 401,
                       last.headers.get("Www-Authenticate", "") if last is not None else "")
    if realm.status_code in (401, 403):
        return refused(client, host, image, realm.status_code)
    where = urlsplit(realm.url).netloc
    if realm.status_code == 200:
        return UserError(f"the token service of {host} ({where}) answered something that "
                         f"is not a token, for {image}",
                         hint="a proxy or a login page may stand in the way; try again later")
    return UserError(f"the token service of {host} ({where}) answered {realm.status_code} "
                     f"for {image}", hint="try again later; your login was not refused")


def unreachable(host: str, image: str, exc: Exception, seen: list[Any]) -> UserError:
    url = getattr(getattr(exc, "request", None), "url", None) or ""
    where, realm = urlsplit(url).netloc, realm_of(seen)
    if realm and url.split("?", 1)[0] == realm:
        return UserError(f"cannot reach the token service of {host} ({where}) for {image}: "
                         f"{type(exc).__name__}",
                         hint="check the network (a proxy, a VPN); nothing was pulled")
    if where and not same_host(urlsplit(url), host):
        return UserError(f"cannot reach the storage {where} that {host} sent the read of "
                         f"{image} to: {type(exc).__name__}", hint="try again later")
    return UserError(f"could not read {image} from {host}: {type(exc).__name__}",
                     hint=f"check the name, the network and your login (docker login {host})")


def refused(client: Any, host: str, image: str, status: int, challenge: str = "") -> UserError:
    """A read turned away: no login, a login refused, or a token the registry would not
    take (the `error=` of its challenge)."""
    hint = (f"log in with `docker login {host}` (NGC: user $oauthtoken, your API key as the "
            "password)")
    error = (re.search(r'error="([^"]+)"', challenge) or [None, ""])[1]
    if error == "invalid_token":
        return UserError(f"{host} did not accept the token its token service gave for "
                         f"{image} (invalid_token)", hint="try again later")
    if not logged_in(client):
        return UserError(f"{host} asks for a login to read {image}, and none is stored",
                         hint=hint)
    if error == "insufficient_scope":
        return UserError(f"your login to {host} has no access to {image} "
                         "(insufficient_scope)", hint="check that your key's org or team may "
                                                      "pull it, or log in as one that may")
    return UserError(f"{host} refused the login for {image} ({status})", hint=hint)
