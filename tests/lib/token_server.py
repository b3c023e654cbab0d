"""A token service as nvcr.io and Docker Hub run one (the distribution registry's token
spec), for the bearer registry of scripts/registry-up.sh, which trusts only its key.

It stands in for NGC's auth service, which cannot be reached from CI; the registry that
checks its tokens is the real one. `$oauthtoken` with API_KEY may pull anything; anyone
may pull `public/*` (as Docker Hub's public images); any other login is refused."""
from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

CONF = Path("/etc/bisect-ngc-registry")
HOST = "127.0.0.1:5001"          # the registry that asks for tokens
REALM_PORT = 5002
USER, API_KEY = "$oauthtoken", "nvapi-test-key"
SERVICE, ISSUER = "bisect-ngc-test", "bisect-ngc-test-tokens"


@dataclass
class Asked:
    """One request for a token: who asked (None: anonymous), for what scope."""
    user: str | None
    scope: str
    granted: bool


@dataclass
class TokenServer:
    asked: list[Asked] = field(default_factory=list)
    stale_tokens: int = 0        # hand out this many tokens already expired first
    fail_with: int = 0           # answer every request with this status (an outage)
    no_token: bool = False       # answer 200 with no token in it
    other_scope: bool = False    # grant the repository "elsewhere" instead of the one asked

    def token(self, user: str | None, scope: str) -> str:
        import jwt
        from cryptography import x509
        from cryptography.hazmat.primitives.serialization import Encoding
        cert = x509.load_pem_x509_certificate((CONF / "token.crt").read_bytes())
        chain = [base64.b64encode(cert.public_bytes(Encoding.DER)).decode()]
        now = int(time.time())
        if self.stale_tokens:
            self.stale_tokens -= 1
            now -= 3600          # past the registry's leeway
        access = []
        kind, _, rest = scope.partition(":")
        name, _, actions = rest.rpartition(":")
        name = "elsewhere" if self.other_scope else name
        if kind == "repository" and (user == USER or rest.startswith("public/")):
            access = [{"type": kind, "name": name,
                       "actions": [a for a in actions.split(",") if a == "pull"]}]
        claims = {"iss": ISSUER, "sub": user or "", "aud": SERVICE, "iat": now, "nbf": now - 5,
                  "exp": now + 300, "jti": uuid.uuid4().hex, "access": access}
        return jwt.encode(claims, (CONF / "token.key").read_bytes(), algorithm="RS256",
                          headers={"x5c": chain})

    def answer(self, authorization: str, query: dict[str, list[str]]) -> tuple[int, dict]:
        if self.fail_with:
            return self.fail_with, {"details": "the service is down"}
        user = None
        if authorization.startswith("Basic "):
            user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
            if (user, password) != (USER, API_KEY):
                self.asked.append(Asked(user, ",".join(query.get("scope", [])), False))
                return 401, {"details": "incorrect username or password"}
        scope = " ".join(query.get("scope", []))
        self.asked.append(Asked(user, scope, True))
        if self.no_token:
            return 200, {"expires_in": 300}
        token = self.token(user, scope)
        return 200, {"token": token, "access_token": token, "expires_in": 300}


def serve(server: TokenServer) -> ThreadingHTTPServer:
    """Serve the realm on 127.0.0.1:REALM_PORT in a daemon thread; .shutdown() ends it."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            url = urlparse(self.path)
            code, body = (server.answer(self.headers.get("Authorization", ""),
                                        parse_qs(url.query))
                          if url.path == "/token" else (404, {}))
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", REALM_PORT), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd
