"""The internals of oras-py that registry.py relies on, in one place. oras has no public
way to give a client one login table, to read a login it loaded, or to send one request
without its retry loop (minutes of sleeps on any error); these are those ways.
tests/images/test_oras_seam.py fails when an oras release changes any of them (pinned <0.3)."""
from __future__ import annotations

from typing import Any


def set_logins(client: Any, table: dict[str, Any]) -> None:
    """The client reads its logins from this table alone."""
    client.auth._auth_config = table


def load_login(client: Any, name: str) -> None:
    """Load the login stored under `name` (Docker Hub's is not under its API host)."""
    client.auth._load_auth(name)


def has_login(client: Any) -> bool:
    return bool(getattr(client.auth, "_basic_auth", None))


def forget_token(client: Any) -> None:
    """Drop a token that expired, so the next request asks for a new one."""
    client.auth.token = None


def get_once(client: Any, url: str, headers: dict[str, str]) -> Any:
    """One GET, answering a 401 with the registry's login, without the retry loop."""
    return type(client).do_request.__wrapped__(client, url, "GET", headers=headers)


def missing(client: Any) -> list[str]:
    """What of the above this client's oras lacks (empty: all there)."""
    gone = [name for name in ("_auth_config", "_load_auth", "load_configs")
            if not hasattr(client.auth, name)]
    if not hasattr(type(client).do_request, "__wrapped__"):
        gone.append("do_request.__wrapped__")
    return gone
