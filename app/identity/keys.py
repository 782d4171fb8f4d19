"""The issuer's signing keys: discovery document and JWKS, fetched with the service's async
HTTP client and cached.

`KeyCache.key_for(kid)` answers from the cache. An unknown `kid` refreshes the cache, but at
most once per `refresh_interval` (a stream of tokens with made-up key ids costs the issuer one
request per interval, not one per token); concurrent misses share one refresh. When a refresh
fails (the issuer is down), keys already cached keep working, and a `kid` the cache lacks is
`IssuerUnavailable` (503 with Retry-After) rather than a rejection: the token may be fine.

Only signing keys of an allowed asymmetric type are kept (`use` absent or `sig`; RSA, EC or
OKP): an `enc` key, a symmetric (`oct`) key or a key PyJWT cannot load is skipped, so no HMAC
key is ever made out of a published key.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
from jwt import PyJWK
from jwt.exceptions import PyJWKError

from app.domain.errors import ServiceUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger("aicp.identity")

#: JWK key types whose keys verify asymmetric signatures (`oct` is HMAC: never).
ASYMMETRIC_KEY_TYPES = frozenset({"RSA", "EC", "OKP"})
#: A JWKS or discovery document larger than this is refused (a real one is a few KiB).
MAX_DOCUMENT_BYTES = 1 << 20


class IssuerUnavailable(ServiceUnavailable):
    """The identity provider's keys could not be fetched; retry shortly."""

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after_seconds = max(1, retry_after)


@dataclass(frozen=True)
class SigningKey:
    kid: str
    key: PyJWK
    algorithm: str | None
    """The JWK's own `alg`, when it names one: a token must then use exactly that."""
    key_type: str


class KeyCache:
    """Discovery + JWKS of one issuer (see the module docstring)."""

    def __init__(
        self,
        issuer: str,
        client: httpx.AsyncClient,
        *,
        refresh_interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer
        self.client = client
        self.refresh_interval = refresh_interval
        self.clock = clock
        self.keys: dict[str, SigningKey] = {}
        self.jwks_uri: str | None = None
        self.discovery: dict[str, Any] | None = None
        """The issuer's discovery document, once read (its endpoints for sign-in flows)."""
        self.last_refresh: float | None = None
        self.last_refresh_failed = False
        self.refreshes = 0
        self._lock = asyncio.Lock()

    async def key_for(self, kid: str) -> SigningKey | None:
        """The cached key `kid`, refreshing once if unknown and allowed; None when the issuer
        (reachable) does not publish it. Raises `IssuerUnavailable` when it could not be asked."""
        found = self.keys.get(kid)
        if found is not None:
            return found
        async with self._lock:
            found = self.keys.get(kid)
            if found is not None:  # another request's refresh brought it
                return found
            if self._may_refresh():
                await self.refresh()
            elif self.last_refresh_failed:
                raise self._unavailable()
            return self.keys.get(kid)

    def _may_refresh(self) -> bool:
        return self.last_refresh is None or (
            self.clock() - self.last_refresh >= self.refresh_interval
        )

    def _unavailable(self) -> IssuerUnavailable:
        assert self.last_refresh is not None
        wait = self.refresh_interval - (self.clock() - self.last_refresh)
        return IssuerUnavailable(
            "The identity provider's signing keys could not be fetched, and the token's key "
            "is not among those cached; retry shortly.",
            int(wait) + 1,
        )

    async def refresh(self) -> None:
        """Fetch discovery (first time) and the JWKS; replace the cache with what it holds."""
        self.last_refresh = self.clock()
        self.refreshes += 1
        try:
            if self.jwks_uri is None:
                self.jwks_uri = await self._discover()
            document = await self._get_json(self.jwks_uri)
        except (httpx.HTTPError, ValueError) as exc:
            self.last_refresh_failed = True
            log.warning("identity provider %s: cannot fetch signing keys: %s", self.issuer, exc)
            raise self._unavailable() from exc
        self.last_refresh_failed = False
        self.keys = parse_jwks(document)
        log.info("identity provider %s: %d signing keys", self.issuer, len(self.keys))

    async def _discover(self) -> str:
        document = await self._get_json(self.issuer + "/.well-known/openid-configuration")
        if document.get("issuer") != self.issuer:
            raise ValueError(
                f"the discovery document names issuer {document.get('issuer')!r}, "
                f"not {self.issuer!r}"
            )
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
            raise ValueError("the discovery document has no jwks_uri")
        self.discovery = document
        return jwks_uri

    async def endpoint(self, name: str) -> str:
        """An endpoint the discovery document names (``authorization_endpoint``, ...), the
        document read once; `IssuerUnavailable` when it cannot be read, ValueError when it
        names no such http(s) endpoint."""
        if self.discovery is None:
            try:
                self.jwks_uri = await self._discover()
            except (httpx.HTTPError, ValueError) as exc:
                log.warning("identity provider %s: cannot read discovery: %s", self.issuer, exc)
                raise IssuerUnavailable(
                    "The identity provider could not be reached; retry shortly.",
                    int(self.refresh_interval) + 1,
                ) from exc
        assert self.discovery is not None
        found = self.discovery.get(name)
        if not isinstance(found, str) or not found.startswith(("https://", "http://")):
            raise ValueError(f"the identity provider's discovery document has no {name}")
        return found

    async def _get_json(self, url: str) -> dict[str, Any]:
        answer = await self.client.get(url, headers={"Accept": "application/json"})
        answer.raise_for_status()
        if len(answer.content) > MAX_DOCUMENT_BYTES:
            raise ValueError(f"{url} is larger than {MAX_DOCUMENT_BYTES} bytes")
        document = answer.json()
        if not isinstance(document, dict):
            raise ValueError(f"{url} is not a JSON object")
        return document


def parse_jwks(document: dict[str, Any]) -> dict[str, SigningKey]:
    """The asymmetric signing keys of a JWKS document, by kid (see the module docstring)."""
    keys: dict[str, SigningKey] = {}
    entries = document.get("keys")
    if not isinstance(entries, list):
        return keys
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        kid, key_type = entry.get("kid"), entry.get("kty")
        if not isinstance(kid, str) or key_type not in ASYMMETRIC_KEY_TYPES:
            continue
        if entry.get("use", "sig") != "sig":
            continue
        algorithm = entry.get("alg")
        try:
            loaded = PyJWK(entry)
        except (PyJWKError, ValueError, TypeError) as exc:
            log.warning("skipping signing key %r: %s", kid, exc)
            continue
        keys[kid] = SigningKey(
            kid, loaded, algorithm if isinstance(algorithm, str) else None, key_type
        )
    return keys
