"""The authorization code flow of a browser sign-in (the dashboard's "Sign in with single
sign-on"), on the server's side: PKCE (S256), `state` and `nonce`.

`start` makes the secrets of one attempt and the issuer's authorization URL (from its
discovery document); the browser keeps the secrets in a short-lived cookie and comes back with
`code` and `state`. `exchange` posts the code and the PKCE verifier to the token endpoint and
checks the answer: the ID token is verified with the same `Verifier` rules as an access token
(signature, `iss`, `exp`/`iat`, `sub`) but for the client's own audience, and its `nonce` must
be this attempt's; the access token is what the API verifies (its audience and groups) and must
name the same subject. Every failure is an `Unauthorized` (or `IssuerUnavailable`) whose detail
is a sentence for the sign-in page.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import secrets
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
import jwt

from app.domain.errors import Unauthorized
from app.identity.keys import IssuerUnavailable
from app.identity.verifier import Verifier

if TYPE_CHECKING:
    from app.identity.verifier import Identity

#: The largest token endpoint answer read (a real one is a few KiB).
MAX_ANSWER_BYTES = 1 << 18
SCOPE = "openid"


@dataclass(frozen=True)
class Attempt:
    """The secrets of one sign-in attempt (kept by the browser, in an HttpOnly cookie)."""

    state: str
    nonce: str
    verifier: str

    def encode(self) -> str:
        return f"{self.state}.{self.nonce}.{self.verifier}"

    @classmethod
    def decode(cls, value: str | None) -> Attempt | None:
        parts = (value or "").split(".")
        if len(parts) != 3 or not all(parts) or len(value or "") > 512:
            return None
        return cls(*parts)

    def matches(self, state: str | None) -> bool:
        return state is not None and hmac.compare_digest(
            self.state.encode("utf-8"), state.encode("utf-8")
        )


def new_attempt() -> Attempt:
    # token_urlsafe never contains ".": the three join unambiguously.
    return Attempt(secrets.token_urlsafe(24), secrets.token_urlsafe(24), secrets.token_urlsafe(48))


def _challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


async def authorization_url(
    verifier: Verifier, attempt: Attempt, *, client_id: str, redirect_uri: str
) -> str:
    """Where the browser is sent to sign in (`IssuerUnavailable` when discovery fails)."""
    endpoint = await _endpoint(verifier, "authorization_endpoint")
    query = urllib.parse.urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "scope": SCOPE,
            "state": attempt.state,
            "nonce": attempt.nonce,
            "code_challenge": _challenge(attempt.verifier),
            "code_challenge_method": "S256",
        }
    )
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"


async def _endpoint(verifier: Verifier, name: str) -> str:
    try:
        return await verifier.keys.endpoint(name)
    except ValueError as exc:
        raise IssuerUnavailable(f"{exc}.".capitalize(), 30) from exc


async def exchange(
    verifier: Verifier, attempt: Attempt, code: str, *, client_id: str, redirect_uri: str
) -> tuple[Identity, str]:
    """Redeem `code`; the ID token's identity and the access token (for the API's rules)."""
    endpoint = await _endpoint(verifier, "token_endpoint")
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "client_id": client_id,
        "code_verifier": attempt.verifier,
    }
    try:
        answer = await verifier.keys.client.post(
            endpoint, data=form, headers={"Accept": "application/json"}
        )
    except httpx.HTTPError as exc:
        raise IssuerUnavailable(
            "The identity provider could not be reached to finish the sign-in; try again.", 5
        ) from exc
    body = _json(answer)
    if answer.status_code != 200:
        if body.get("error") == "invalid_grant":
            raise Unauthorized(
                "The identity provider did not accept the sign-in's code: it has expired or "
                "was used already. Sign in again."
            )
        raise Unauthorized(
            "The identity provider refused to finish the sign-in "
            f"({_said(body) or f'HTTP {answer.status_code}'}). Sign in again."
        )
    id_token, access_token = body.get("id_token"), body.get("access_token")
    if not isinstance(id_token, str) or not isinstance(access_token, str):
        raise Unauthorized("The identity provider sent no ID token or no access token.")
    identity = await _verify_id_token(verifier, id_token, attempt, client_id)
    return identity, access_token


async def _verify_id_token(
    verifier: Verifier, id_token: str, attempt: Attempt, client_id: str
) -> Identity:
    for_client = Verifier(dataclasses.replace(verifier.config, audience=client_id), verifier.keys)
    try:
        identity = await for_client.verify(id_token)
    except Unauthorized as exc:
        raise Unauthorized(
            f"The identity provider's ID token did not verify: {exc.detail}"
        ) from exc
    # The signature and claims were just verified: reading the nonce needs no second check.
    claims = jwt.decode(id_token, options={"verify_signature": False})
    nonce = claims.get("nonce")
    if not isinstance(nonce, str) or not hmac.compare_digest(
        nonce.encode("utf-8"), attempt.nonce.encode("utf-8")
    ):
        raise Unauthorized("The ID token was not issued for this sign-in (nonce mismatch).")
    return identity


def _json(answer: httpx.Response) -> dict[str, Any]:
    if len(answer.content) > MAX_ANSWER_BYTES:
        return {}
    try:
        body = answer.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _said(body: dict[str, Any]) -> str:
    said = body.get("error_description") or body.get("error")
    return str(said)[:200] if said else ""
