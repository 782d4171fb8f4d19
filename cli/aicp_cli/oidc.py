"""Signing a person in through the installation's OpenID Connect provider.

`aicp login --oidc` asks the server how to sign in (`GET /api/v1/sign-on`: issuer, client id),
reads the issuer's discovery document and runs one of two flows with PKCE (S256):

- the **device authorization grant** (default): prints the verification URL and the user
  code, and polls the token endpoint until the person has approved (or the code expired);
- **authorization code on a loopback redirect** (`--browser`): listens on 127.0.0.1 on a free
  port, opens (or prints) the authorization URL, and takes the code from the redirect; the
  `state` must match.

The access and refresh tokens are kept in the context (config file, 0600); `fresh()` renews an
access token that expires within `RENEW_BEFORE_SECONDS` with the refresh token, transparently,
before a command sends it. `aicp logout` revokes the refresh token at the issuer when it offers
a revocation endpoint and forgets both.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
import urllib.parse
import webbrowser
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import TYPE_CHECKING, Any

import click
import httpx

from aicp_cli.errors import CliError

if TYPE_CHECKING:
    from collections.abc import Callable

RENEW_BEFORE_SECONDS = 30
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
LOGIN_TIMEOUT_SECONDS = 600.0


@dataclass(frozen=True)
class Provider:
    issuer: str
    client_id: str
    token_endpoint: str
    authorization_endpoint: str | None
    device_endpoint: str | None
    revocation_endpoint: str | None
    scope: str = "openid"


def _json(response: httpx.Response, what: str) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise CliError(f"{what} answered HTTP {response.status_code}, not JSON")
    return body


def provider_of(server_url: str, client_id: str | None = None, scope: str = "openid") -> Provider:
    """The server's identity provider (its `/api/v1/sign-on`) and its discovery document."""
    try:
        answer = httpx.get(f"{server_url}/api/v1/sign-on", timeout=30)
        if answer.status_code == 404:
            raise CliError(f"{server_url} has no single sign-on configured: use an API token")
        info = _json(answer, f"{server_url}/api/v1/sign-on")
        issuer = str(info["issuer"])
        found = _json(
            httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=30),
            "the issuer's discovery document",
        )
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach {server_url} or its identity provider: {exc}") from exc
    except KeyError as exc:
        raise CliError(f"{server_url}/api/v1/sign-on names no issuer") from exc
    return Provider(
        issuer=issuer,
        client_id=client_id or str(info.get("cli_client_id") or "aicp-cli"),
        token_endpoint=str(found["token_endpoint"]),
        authorization_endpoint=found.get("authorization_endpoint"),
        device_endpoint=found.get("device_authorization_endpoint"),
        revocation_endpoint=found.get("revocation_endpoint"),
        scope=scope,
    )


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    return verifier, challenge.rstrip(b"=").decode()


def _token_request(provider: Provider, form: dict[str, str]) -> httpx.Response:
    try:
        return httpx.post(
            provider.token_endpoint, data={"client_id": provider.client_id, **form}, timeout=30
        )
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach the identity provider: {exc}") from exc


def tokens_entry(provider: Provider, answer: dict[str, Any]) -> dict[str, Any]:
    """What the context keeps of a token response."""
    if "access_token" not in answer:
        raise CliError(f"the identity provider sent no access token: {answer}")
    return {
        "issuer": provider.issuer,
        "client_id": provider.client_id,
        "token_endpoint": provider.token_endpoint,
        "revocation_endpoint": provider.revocation_endpoint,
        "refresh_token": answer.get("refresh_token"),
        "expires_at": int(time.time()) + int(answer.get("expires_in", 300)),
        "access_token": answer["access_token"],
    }


def device_login(provider: Provider, say: Callable[[str], None] = click.echo) -> dict[str, Any]:
    """The device authorization grant with PKCE (prints the URL and code, then waits)."""
    if provider.device_endpoint is None:
        raise CliError("the identity provider offers no device authorization; try --browser")
    verifier, challenge = _pkce()
    try:
        started = httpx.post(
            provider.device_endpoint,
            data={
                "client_id": provider.client_id,
                "scope": provider.scope,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            },
            timeout=30,
        )
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach the identity provider: {exc}") from exc
    device = _json(started, "the device authorization endpoint")
    if started.status_code != 200:
        raise CliError(f"device authorization refused: {device.get('error_description')}")
    complete = device.get("verification_uri_complete")
    say(f"To sign in, open {device['verification_uri']} and enter the code {device['user_code']}")
    if complete:
        say(f"  (or open {complete})")
    say("Waiting for you to approve...")
    interval = float(device.get("interval", 5))
    deadline = time.monotonic() + min(float(device.get("expires_in", 600)), LOGIN_TIMEOUT_SECONDS)
    while time.monotonic() < deadline:
        time.sleep(interval)
        answer = _token_request(
            provider,
            {
                "grant_type": DEVICE_GRANT,
                "device_code": device["device_code"],
                "code_verifier": verifier,
            },
        )
        body = _json(answer, "the token endpoint")
        if answer.status_code == 200:
            return tokens_entry(provider, body)
        error = body.get("error")
        if error == "slow_down":
            interval += 5
        elif error != "authorization_pending":
            raise CliError(f"sign-in failed: {body.get('error_description') or error}")
    raise CliError("sign-in timed out: the code was not approved in time")


def browser_login(
    provider: Provider, *, open_browser: bool = True, say: Callable[[str], None] = click.echo
) -> dict[str, Any]:
    """Authorization code + PKCE on a loopback redirect (http://127.0.0.1:<port>/callback)."""
    if provider.authorization_endpoint is None:
        raise CliError("the identity provider offers no authorization endpoint")
    verifier, challenge = _pkce()
    state = secrets.token_urlsafe(24)
    received: dict[str, str] = {}
    done = threading.Event()

    class Callback(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
            if "code" not in query and "error" not in query:
                self.send_response(404)
                self.end_headers()
                return
            received.update(query)
            ok = "code" in query and query.get("state") == state
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.end_headers()
            self.wfile.write(
                b"Signed in to aicp; you may close this window.\n"
                if ok
                else b"Sign-in failed; see the terminal.\n"
            )
            done.set()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Callback)
    redirect = f"http://127.0.0.1:{server.server_address[1]}/callback"
    url = (
        provider.authorization_endpoint
        + "?"
        + urllib.parse.urlencode(
            {
                "response_type": "code",
                "client_id": provider.client_id,
                "redirect_uri": redirect,
                "scope": "openid",
                "state": state,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            }
        )
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        say(f"To sign in, open {url}")
        if open_browser:
            webbrowser.open(url)
        if not done.wait(LOGIN_TIMEOUT_SECONDS):
            raise CliError("sign-in timed out: no redirect came back")
    finally:
        server.shutdown()
        server.server_close()
    if received.get("state") != state:
        raise CliError("sign-in failed: the redirect's state does not match this login")
    if "code" not in received:
        raise CliError(
            f"sign-in failed: {received.get('error_description') or received.get('error')}"
        )
    answer = _token_request(
        provider,
        {
            "grant_type": "authorization_code",
            "code": received["code"],
            "redirect_uri": redirect,
            "code_verifier": verifier,
        },
    )
    body = _json(answer, "the token endpoint")
    if answer.status_code != 200:
        raise CliError(f"sign-in failed: {body.get('error_description') or body.get('error')}")
    return tokens_entry(provider, body)


def fresh(entry: dict[str, Any]) -> dict[str, Any] | None:
    """A renewed copy of a context's tokens when the access token is (about to be) expired;
    None when it is still good."""
    if int(entry.get("expires_at", 0)) - RENEW_BEFORE_SECONDS > time.time():
        return None
    refresh_token = entry.get("refresh_token")
    if not refresh_token:
        raise CliError("your sign-in has expired: run 'aicp login --oidc' again")
    try:
        answer = httpx.post(
            str(entry["token_endpoint"]),
            data={
                "grant_type": "refresh_token",
                "refresh_token": refresh_token,
                "client_id": entry["client_id"],
            },
            timeout=30,
        )
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach the identity provider to renew your sign-in: {exc}") from exc
    body = _json(answer, "the token endpoint")
    if answer.status_code != 200:
        raise CliError(
            "your sign-in has expired or was revoked "
            f"({body.get('error_description') or body.get('error')}): run 'aicp login --oidc'"
        )
    provider = Provider(
        issuer=str(entry["issuer"]),
        client_id=str(entry["client_id"]),
        token_endpoint=str(entry["token_endpoint"]),
        authorization_endpoint=None,
        device_endpoint=None,
        revocation_endpoint=entry.get("revocation_endpoint"),
    )
    renewed = tokens_entry(provider, body)
    if not renewed["refresh_token"]:
        renewed["refresh_token"] = refresh_token
    return renewed


def revoke(entry: dict[str, Any]) -> bool:
    """Revoke the refresh token at the issuer (best effort); whether it said yes."""
    endpoint, refresh_token = entry.get("revocation_endpoint"), entry.get("refresh_token")
    if not endpoint or not refresh_token:
        return False
    try:
        answer = httpx.post(
            str(endpoint),
            data={
                "token": refresh_token,
                "token_type_hint": "refresh_token",
                "client_id": entry["client_id"],
            },
            timeout=30,
        )
    except httpx.HTTPError:
        return False
    return answer.status_code == 200
