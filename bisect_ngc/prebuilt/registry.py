"""Image configs read from their registry with no layer pulled: the tag's manifest, the
platform's manifest where the tag names a list or an index, then the config blob (a few KB).

Through oras-py, with the credentials `docker login` stored ($DOCKER_CONFIG/config.json,
else ~/.docker/config.json): bearer tokens as nvcr.io and Docker Hub hand them out (NGC's
user is `$oauthtoken`), or basic auth where the registry asks for it. Each config is cached
by its digest, so only the manifest is read again."""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import requests

from ..errors import UserError

MANIFEST_TYPES = ", ".join((
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json"))
LOCAL_HOSTS = ("localhost", "127.0.0.1")
# registry host[:port] / path [:tag] [@digest]: the registry is named, as in a pull
REFERENCE_RE = re.compile(r"^([a-z0-9.-]+(?::\d+)?)/[a-z0-9._-]+(?:/[a-z0-9._-]+)*"
                          r"(?::[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(?:@sha256:[0-9a-f]{64})?$")


def docker_config() -> Path:
    return Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "config.json"


class Registry:
    """Reads image configs; one per command (it keeps each registry's login)."""

    def __init__(self, cache_dir: Path, os_name: str = "linux", arch: str = "amd64"):
        self.cache = cache_dir / "image-configs"
        self.platform = (os_name, arch)
        self._clients: dict[str, Any] = {}

    @staticmethod
    def reference(image: str) -> Any:
        """The parsed reference (oras' Container), or one sentence on what is wrong."""
        import oras.container
        match = REFERENCE_RE.match(image)
        host = match.group(1) if match else ""
        if not match or not ("." in host or ":" in host or host == "localhost"):
            raise UserError(f"'{image}' is not an image reference with its registry",
                            hint="e.g. nvcr.io/nvidia/pytorch:24.09-py3, or a release: 24.09")
        return oras.container.Container(image)

    def config(self, image: str) -> tuple[str, dict[str, Any]]:
        """The image's config digest and config, read without pulling a layer."""
        ref = self.reference(image)
        manifest = self._get(ref, ref.manifest_url(), image, MANIFEST_TYPES).json()
        if "manifests" in manifest:          # a list or an index: this platform's manifest
            digest = self._platform(manifest, image)
            manifest = self._get(ref, ref.manifest_url(digest), image, MANIFEST_TYPES).json()
        digest = manifest["config"]["digest"]
        cached = self.cache / f"{digest.replace(':', '-')}.json"
        if cached.is_file():
            return digest, json.loads(cached.read_text())
        body = self._get(ref, ref.get_blob_url(digest), image).content
        if "sha256:" + hashlib.sha256(body).hexdigest() != digest:
            raise UserError(f"the config of {image} does not match its digest {digest}",
                            hint="the registry served something else; try again")
        self.cache.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp")
        tmp.write_bytes(body)
        tmp.replace(cached)
        return digest, json.loads(body)

    def tags(self, repository: str) -> list[str]:
        """Every tag of a repository (the registry's pages followed)."""
        ref = self.reference(f"{repository}:latest")
        url, found = ref.tags_url(), list[str]()
        while url:
            answer = self._get(ref, url, repository)
            found += answer.json().get("tags") or []
            following = answer.links.get("next", {}).get("url", "")     # RFC 5988 Link
            url = f"{ref.registry}{following}" if following.startswith("/") else \
                following.split("://", 1)[-1] if following else ""
        return found

    def _platform(self, index: dict[str, Any], image: str) -> str:
        want = self.platform
        for entry in index["manifests"]:
            p = entry.get("platform") or {}
            if (p.get("os"), p.get("architecture")) == want:
                return entry["digest"]
        have = sorted(f"{(e.get('platform') or {}).get('os')}/"
                      f"{(e.get('platform') or {}).get('architecture')}"
                      for e in index["manifests"])
        raise UserError(f"{image} has no {want[0]}/{want[1]} image (it has "
                        f"{', '.join(have) or 'none'})", hint="name a tag built for it")

    def _get(self, ref: Any, url: str, image: str, accept: str | None = None
             ) -> requests.Response:
        client = self._client(ref)
        headers = {"Accept": accept} if accept else {}
        # do_request answers 401 with the registry's login; its retry loop (minutes of
        # sleeps on any error) is left out: an error here is the user's to see at once.
        try:
            response = type(client).do_request.__wrapped__(
                client, f"{client.prefix}://{url}", "GET", headers=headers)
        except (requests.RequestException, ValueError) as exc:
            raise UserError(f"could not read {image} from {ref.registry}: {exc}",
                            hint="check the name and your login (docker login "
                                 f"{ref.registry})") from None
        if response.status_code in (401, 403):
            raise UserError(f"{ref.registry} refused the login for {image} "
                            f"({response.status_code})",
                            hint=f"log in with `docker login {ref.registry}` (NGC: user "
                                 "$oauthtoken, your API key as the password)")
        if response.status_code == 404:
            raise UserError(f"{image} is not in {ref.registry} (no such repository or tag)",
                            hint="check the tag; `bisect-ngc releases` lists NGC's")
        if response.status_code != 200:
            raise UserError(f"{ref.registry} answered {response.status_code} for {image}",
                            hint="try again later")
        return response

    def _client(self, ref: Any) -> Any:
        host = ref.registry
        if host not in self._clients:
            import oras.provider
            insecure = host.split(":")[0] in LOCAL_HOSTS       # plain http on this machine
            scheme = self._scheme(host, insecure)
            client = oras.provider.Registry(host, insecure=insecure, auth_backend=scheme)
            config = docker_config()
            client.auth.load_configs(ref, configs=[str(config)] if config.is_file() else [])
            if scheme == "basic" and not getattr(client.auth, "_basic_auth", None):
                raise UserError(f"{host} asks for a login and none is stored",
                                hint=f"log in with `docker login {host}`")
            self._clients[host] = client
        return self._clients[host]

    @staticmethod
    def _scheme(host: str, insecure: bool) -> str:
        """basic or token: what the registry asks for at /v2/ (and whether it answers)."""
        url = f"{'http' if insecure else 'https'}://{host}/v2/"
        try:
            answer = requests.get(url, timeout=15)
        except requests.RequestException as exc:
            raise UserError(f"cannot reach the registry {host}: {type(exc).__name__}",
                            hint="check the name and the network (a proxy, a VPN); "
                                 "nothing was pulled") from None
        challenge = answer.headers.get("Www-Authenticate", "")
        return "basic" if challenge.lower().startswith("basic") else "token"
