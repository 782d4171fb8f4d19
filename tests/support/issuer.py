"""A minimal OpenID Connect issuer on loopback for the verifier's tests: it serves a discovery
document and a JWKS of locally generated keys, mints tokens with them, counts the JWKS requests
and can be taken down (every request then answers 503)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

AUDIENCE = "aicp"


@dataclass
class SigningPair:
    kid: str
    private: Any
    jwk: dict[str, Any]


def rsa_pair(kid: str) -> SigningPair:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(RSAAlgorithm.to_jwk(private.public_key()))
    return SigningPair(kid, private, {**jwk, "kid": kid, "use": "sig", "alg": "RS256"})


def ec_pair(kid: str) -> SigningPair:
    private = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(ECAlgorithm.to_jwk(private.public_key()))
    return SigningPair(kid, private, {**jwk, "kid": kid, "use": "sig", "alg": "ES256"})


@dataclass
class LocalIssuer:
    published: list[SigningPair] = field(default_factory=list)
    jwks_requests: int = 0
    down: bool = False
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/realms/test"

    def start(self) -> None:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if issuer.down:
                    self._send(503, {"error": "down"})
                elif self.path.endswith("/.well-known/openid-configuration"):
                    self._send(200, {"issuer": issuer.url, "jwks_uri": issuer.url + "/certs"})
                elif self.path.endswith("/certs"):
                    issuer.jwks_requests += 1
                    self._send(200, {"keys": [pair.jwk for pair in issuer.published]})
                else:
                    self._send(404, {})

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                """Log nothing: every request to this issuer is the test's own."""

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.url,
            "aud": AUDIENCE,
            "sub": "subject-1",
            "preferred_username": "bob",
            "groups": ["vision-team"],
            "iat": now,
            "nbf": now,
            "exp": now + 300,
        }
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def mint(
        self,
        pair: SigningPair,
        claims: dict[str, Any] | None = None,
        *,
        alg: str | None = None,
        kid: str | None = None,
    ) -> str:
        algorithm = alg or pair.jwk["alg"]
        return jwt.encode(
            self.claims() if claims is None else claims,
            pair.private,
            algorithm=algorithm,
            headers={"kid": kid or pair.kid},
        )
