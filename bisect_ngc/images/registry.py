"""Image configs read from their registry with no layer pulled: the tag's manifest, the
platform's manifest where the tag names a list or an index, then the config blob (a few KB).

Through oras-py, with the credentials `docker login` stored ($DOCKER_CONFIG/config.json,
else ~/.docker/config.json): bearer tokens as nvcr.io and Docker Hub hand them out (NGC's
user is `$oauthtoken`), or basic auth where the registry asks for it. Each config is cached
by its digest, so only the manifest is read again."""
from __future__ import annotations

import collections
import functools
import hashlib
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests

from ..errors import UserError
from . import oras_seam
from .registry_login import (api_name, load_login, logged_in, login_step_failed, quiet_oras,
                             refused, same_host, unreachable)

MANIFEST_TYPES = ", ".join((
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json"))
LOCAL_HOSTS = ("localhost", "127.0.0.1")
TIMEOUT_S = 30         # a registry that stalls: one sentence, not a hang
# registry host[:port] / path [:tag] [@digest]: the registry is named, as in a pull
REFERENCE_RE = re.compile(r"^([a-z0-9.-]+(?::\d+)?)/[a-z0-9._-]+(?:/[a-z0-9._-]+)*"
                          r"(?::[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(?:@sha256:[0-9a-f]{64})?$")


class Registry:
    """Reads image configs; one per command (it keeps each repository's login)."""

    def __init__(self, cache_dir: Path, platform: str = "linux/amd64"):
        self.cache = cache_dir / "image-configs"
        parts = platform.split("/")
        if len(parts) not in (2, 3) or not all(parts):
            raise UserError(f"--platform {platform!r} is not OS/ARCH[/VARIANT]",
                            hint="e.g. --platform linux/amd64 or linux/arm64/v8")
        self.platform = platform
        self._clients: dict[tuple[str, str], Any] = {}
        self._seen: dict[int, collections.deque[requests.Response]] = {}   # by client

    @staticmethod
    def reference(image: str) -> Any:
        """The parsed reference (oras' Container), or one sentence on what is wrong."""
        import oras.container
        match = REFERENCE_RE.match(image)
        host = match.group(1) if match else ""
        if not match or not ("." in host or ":" in host or host == "localhost"):
            raise UserError(f"'{image}' is not an image reference with its registry",
                            hint="e.g. nvcr.io/nvidia/pytorch:24.09-py3, or a release: 24.09")
        return oras.container.Container(api_name(image, host))

    def config(self, image: str) -> tuple[str, dict[str, Any]]:
        """The image's config digest and config, read without pulling a layer."""
        ref = self.reference(image)
        manifest = self._json(ref, ref.manifest_url(), image, MANIFEST_TYPES)
        if "manifests" in manifest:          # a list or an index: this platform's manifest
            digest = self._platform(manifest, image)
            manifest = self._json(ref, ref.manifest_url(digest), image, MANIFEST_TYPES)
        digest = (manifest.get("config") or {}).get("digest", "")
        if not isinstance(digest, str) or ":" not in digest:
            raise UserError(f"{image} names no image config (an index in an index, or an "
                            "artifact that is not an image)", hint="name an image's tag")
        cached = self.cache / f"{digest.replace(':', '-')}.json"
        body = cached.read_bytes() if cached.is_file() else b""
        if not _matches(body, digest):       # not cached, or a file that went bad
            body = self._get(ref, ref.get_blob_url(digest), image).content
            if not _matches(body, digest):
                raise UserError(f"the config of {image} does not match its digest {digest}",
                                hint="the registry served something else; try again")
            self.cache.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(".tmp")
            tmp.write_bytes(body)
            tmp.replace(cached)
        config = _loads(body, image)
        self._check_platform(config, image)
        return digest, config

    def tags(self, repository: str) -> list[str]:
        """Every tag of a repository (the registry's pages followed, on its own host)."""
        ref = self.reference(f"{repository}:latest")
        url, found, seen = ref.tags_url(), list[str](), set()
        while url and url not in seen:
            seen.add(url)
            answer = self._get(ref, url, repository)
            found += _loads(answer.content, repository).get("tags") or []
            url = self._next_page(ref, answer.links.get("next", {}).get("url", ""))
        return found

    @staticmethod
    def _next_page(ref: Any, link: str) -> str:
        """The next page's URL without its scheme, if the Link header names one on this
        registry (the login is never sent to another host)."""
        if not link:
            return ""
        if link.lower().startswith(ref.registry.lower() + "/"):
            link = f"http://{link}"                            # named without its scheme
        url = urljoin(f"http://{ref.tags_url()}", link)      # relative to the tag list
        if not same_host(urlsplit(url), ref.registry):
            raise UserError(f"{ref.registry} pointed its tag list at another host ({link})",
                            hint="the login is kept for its own registry; list the tags "
                                 "there")
        parts = urlsplit(url)
        return ref.registry + parts.path + (f"?{parts.query}" if parts.query else "")

    def _platform(self, index: dict[str, Any], image: str) -> str:
        def name(entry: dict[str, Any]) -> str:
            p = entry.get("platform") or {}
            return "/".join(x for x in (p.get("os"), p.get("architecture"), p.get("variant"))
                            if x) or "unnamed"
        entries = [e for e in index.get("manifests") or [] if isinstance(e, dict)]
        want = self.platform
        exact = [e for e in entries if name(e) == want]
        loose = [e for e in entries if want.count("/") == 1 and name(e).startswith(want + "/")]
        chosen = next(iter(exact + loose), {})
        if not chosen.get("digest"):
            have = sorted({name(e) for e in entries})
            raise UserError(f"{image} has no {want} image (it has "
                            f"{', '.join(have) or 'none'})",
                            hint="pass --platform with one of those, or name a tag built for "
                                 "it")
        return chosen["digest"]

    def _check_platform(self, config: dict[str, Any], image: str) -> None:
        """A single-platform tag for another platform says so, instead of answering."""
        os_name, arch = config.get("os"), config.get("architecture")
        wanted = self.platform.split("/")
        if os_name and arch and [os_name, arch] != wanted[:2]:
            raise UserError(f"{image} is a {os_name}/{arch} image, not {self.platform}",
                            hint=f"pass --platform {os_name}/{arch} to read it")

    def _json(self, ref: Any, url: str, image: str, accept: str | None = None
              ) -> dict[str, Any]:
        return _loads(self._get(ref, url, image, accept).content, image)

    def _get(self, ref: Any, url: str, image: str, accept: str | None = None
             ) -> requests.Response:
        client = self._client(ref)
        response = self._request(client, ref, url, image, accept)
        if response.status_code == 401 and getattr(client.auth, "token", None):
            oras_seam.forget_token(client)   # a token that expired: ask for a new one, once
            response = self._request(client, ref, url, image, accept)
        if not same_host(urlsplit(response.url), ref.registry) and response.status_code != 200:
            raise UserError(f"the storage {urlsplit(response.url).netloc} that {ref.registry} "
                            f"sent the read of {image} to answered {response.status_code}",
                            hint="try again later")
        if response.status_code in (401, 403):
            raise refused(client, ref.registry, image, response.status_code,
                          response.headers.get("Www-Authenticate", ""))
        if response.status_code == 404:
            raise UserError(f"{image} is not in {ref.registry} (no such repository or tag)",
                            hint="check the tag; `bisect-ngc releases` lists NGC's")
        if response.status_code != 200:
            raise UserError(f"{ref.registry} answered {response.status_code} for {image}",
                            hint="try again later")
        return response

    def _request(self, client: Any, ref: Any, url: str, image: str, accept: str | None
                 ) -> requests.Response:
        headers = {"Accept": accept} if accept else {}
        seen = self._seen[id(client)]
        seen.clear()                         # this request's answers, the token's among them
        # an error here is the user's to see at once, with no retry loop
        try:
            return oras_seam.get_once(client, f"{client.prefix}://{url}", headers)
        except requests.exceptions.JSONDecodeError:     # the token service's answer
            raise login_step_failed(client, ref.registry, image, list(seen)) from None
        except requests.RequestException as exc:
            raise unreachable(ref.registry, image, exc, list(seen)) from None
        except (ValueError, AttributeError, TypeError, KeyError):    # oras got no token
            raise login_step_failed(client, ref.registry, image, list(seen)) from None

    def _client(self, ref: Any) -> Any:
        """oras' client for this repository: token registries scope a token to one."""
        key = (ref.registry, ref.api_prefix)
        if key not in self._clients:
            import oras.provider
            quiet_oras()
            host = ref.registry
            insecure = host.split(":")[0] in LOCAL_HOSTS       # plain http on this machine
            scheme = self._scheme(host, insecure)
            client = oras.provider.Registry(host, insecure=insecure, auth_backend=scheme)
            # every request of the client and of its login has a time limit
            client.session.request = functools.partial(client.session.request,
                                                       timeout=TIMEOUT_S)
            seen = self._seen[id(client)] = collections.deque(maxlen=8)
            client.session.hooks["response"].append(lambda r, *a, **k: seen.append(r))
            load_login(client, ref)
            if scheme == "basic" and not logged_in(client):
                raise UserError(f"{host} asks for a login and none is stored",
                                hint=f"log in with `docker login {host}`")
            self._clients[key] = client
        return self._clients[key]

    @staticmethod
    def _scheme(host: str, insecure: bool) -> str:
        """basic or token: what the registry asks for at /v2/ (and whether it answers)."""
        url = f"{'http' if insecure else 'https'}://{host}/v2/"
        try:
            answer = requests.get(url, timeout=TIMEOUT_S)
        except requests.RequestException as exc:
            raise UserError(f"cannot reach the registry {host}: {type(exc).__name__}",
                            hint="check the name and the network (a proxy, a VPN); "
                                 "nothing was pulled") from None
        challenge = answer.headers.get("Www-Authenticate", "")
        return "basic" if challenge.lower().startswith("basic") else "token"


def _matches(body: bytes, digest: str) -> bool:
    algorithm, _, value = digest.partition(":")
    if not body or algorithm not in ("sha256", "sha384", "sha512"):
        return False
    return hashlib.new(algorithm, body).hexdigest() == value


def _loads(body: bytes, image: str) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise UserError(f"what the registry served for {image} is not JSON",
                        hint="a proxy or a login page may stand in the way; check the "
                             "network")
    return value
