"""Verify an OpenID Connect access token (a JWT) and say who it names.

Checks, in order, each failure an `Unauthorized` whose detail says what was wrong:

1. **Size and shape before parsing**: at most `max_token_bytes`; three base64url segments; the
   decoded header and payload nest JSON at most `MAX_JSON_DEPTH` deep (a deeply nested token
   is refused without being handed to a JSON parser).
2. **Algorithm**: the header's `alg` is one of `algorithms`, an allow-list of asymmetric
   algorithms (`none` and HS* can never be configured); a `kid` is required.
3. **Key**: the issuer's key `kid` (`app.identity.keys.KeyCache`: refreshed at most once per
   interval; the issuer down and the key unknown → 503). The key's type must fit the algorithm
   (an RSA key for RS*/PS*, EC for ES*, OKP for EdDSA), and its own `alg`, if it has one, must
   be the token's.
4. **Signature and claims** (PyJWT): `iss` exactly the issuer, `aud` containing the audience,
   `exp` and `iat` present, `exp`/`nbf`/`iat` within `leeway` seconds of now (at most
   `MAX_LEEWAY_SECONDS`), and `sub` present.

The answer is an `Identity`: subject, username (the configured claim, else the subject) and
groups (the configured claim: a list of strings; a path such as `/team/a` is kept as given).
"""

from __future__ import annotations

import base64
import binascii
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import jwt
from jwt.exceptions import InvalidTokenError

from app.domain.errors import Unauthorized

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.identity.keys import KeyCache

#: The algorithms a token may be signed with; the configured allow-list is a subset.
ASYMMETRIC_ALGORITHMS: Final = {
    "RS256": "RSA",
    "RS384": "RSA",
    "RS512": "RSA",
    "PS256": "RSA",
    "PS384": "RSA",
    "PS512": "RSA",
    "ES256": "EC",
    "ES384": "EC",
    "ES512": "EC",
    "EdDSA": "OKP",
}
DEFAULT_ALGORITHMS: Final = ("RS256", "PS256", "ES256")
MAX_LEEWAY_SECONDS: Final = 300
DEFAULT_MAX_TOKEN_BYTES: Final = 16384
MAX_JSON_DEPTH: Final = 8
MAX_GROUPS: Final = 1000
MAX_CLAIM_CHARS: Final = 512
_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class OidcConfig:
    issuer: str
    audience: str
    username_claim: str = "preferred_username"
    groups_claim: str = "groups"
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    leeway_seconds: int = 30
    max_token_bytes: int = DEFAULT_MAX_TOKEN_BYTES

    def __post_init__(self) -> None:
        unknown = [alg for alg in self.algorithms if alg not in ASYMMETRIC_ALGORITHMS]
        if unknown or not self.algorithms:
            raise ValueError(f"not asymmetric JWS algorithms: {unknown}")
        if not 0 <= self.leeway_seconds <= MAX_LEEWAY_SECONDS:
            raise ValueError(f"leeway beyond {MAX_LEEWAY_SECONDS} s")


@dataclass(frozen=True)
class Identity:
    """The person an access token names."""

    issuer: str
    subject: str
    username: str
    groups: tuple[str, ...]
    expires_at: datetime


def looks_like_jwt(credentials: str) -> bool:
    """Whether a bearer credential has a JWT's shape (three dot-separated segments)."""
    return credentials.count(".") == 2


class Verifier:
    """Checks tokens of one issuer (see the module docstring)."""

    def __init__(
        self, config: OidcConfig, keys: KeyCache, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.config = config
        self.keys = keys
        self.clock = clock

    async def verify(self, token: str) -> Identity:
        header, _ = _parse_shape(token, self.config.max_token_bytes)
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.config.algorithms:
            raise Unauthorized(
                f"The token's signing algorithm {alg!r} is not accepted "
                f"(accepted: {', '.join(self.config.algorithms)})."
            )
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid or len(kid) > MAX_CLAIM_CHARS:
            raise Unauthorized("The token names no signing key (kid).")
        key = await self.keys.key_for(kid)
        if key is None:
            raise Unauthorized(
                "The token is signed with a key the identity provider does not publish."
            )
        if ASYMMETRIC_ALGORITHMS[alg] != key.key_type or (
            key.algorithm is not None and key.algorithm != alg
        ):
            raise Unauthorized(f"The token's algorithm {alg} does not fit its signing key.")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key.key,
                algorithms=[alg],
                audience=self.config.audience,
                issuer=self.config.issuer,
                leeway=self.config.leeway_seconds,
                options={"require": ["exp", "iat", "iss", "aud", "sub"], "verify_iat": True},
            )
        except jwt.ExpiredSignatureError as exc:
            raise Unauthorized("The token has expired.") from exc
        except jwt.ImmatureSignatureError as exc:
            raise Unauthorized("The token is not valid yet.") from exc
        except jwt.InvalidIssuerError as exc:
            raise Unauthorized("The token was issued by another identity provider.") from exc
        except jwt.InvalidAudienceError as exc:
            raise Unauthorized(
                f"The token is not meant for this service (audience {self.config.audience!r})."
            ) from exc
        except jwt.InvalidSignatureError as exc:
            raise Unauthorized("The token's signature does not verify.") from exc
        except jwt.MissingRequiredClaimError as exc:
            raise Unauthorized(f"The token lacks the {exc.claim!r} claim.") from exc
        except (InvalidTokenError, ValueError, TypeError) as exc:
            raise Unauthorized("The token is not valid.") from exc
        return self._identity(claims)

    def _identity(self, claims: dict[str, Any]) -> Identity:
        now = self.clock()
        iat = claims["iat"]
        if not isinstance(iat, int | float) or iat > now + self.config.leeway_seconds:
            raise Unauthorized("The token is not valid yet.")
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject or len(subject) > MAX_CLAIM_CHARS:
            raise Unauthorized("The token's subject (sub) is not a string.")
        username = claims.get(self.config.username_claim)
        if not isinstance(username, str) or not username or len(username) > MAX_CLAIM_CHARS:
            username = subject
        return Identity(
            issuer=self.config.issuer,
            subject=subject,
            username=username,
            groups=_groups(claims.get(self.config.groups_claim)),
            expires_at=datetime.fromtimestamp(claims["exp"], UTC),
        )


def _groups(raw: object) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        return ()
    seen: dict[str, None] = {}
    for group in raw[:MAX_GROUPS]:
        if isinstance(group, str) and group and len(group) <= MAX_CLAIM_CHARS:
            seen[group] = None
    return tuple(seen)


def _parse_shape(token: str, max_bytes: int) -> tuple[dict[str, Any], bytes]:
    """The header (parsed) and the payload (raw), once size and nesting are within bounds."""
    if len(token) > max_bytes:
        raise Unauthorized(f"The token is longer than {max_bytes} bytes.")
    if not _SHAPE.fullmatch(token):
        raise Unauthorized("The token is not a JSON Web Token.")
    head, body, _ = token.split(".")
    header_bytes, payload = _b64(head), _b64(body)
    for part in (header_bytes, payload):
        if json_depth(part) > MAX_JSON_DEPTH:
            raise Unauthorized(f"The token nests JSON deeper than {MAX_JSON_DEPTH} levels.")
    try:
        header = jwt.get_unverified_header(token)
    except InvalidTokenError as exc:
        raise Unauthorized("The token's header is not valid JSON.") from exc
    return header, payload


def _b64(segment: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    except (binascii.Error, ValueError) as exc:
        raise Unauthorized("The token is not a JSON Web Token.") from exc


def json_depth(document: bytes) -> int:
    """How deep arrays and objects nest in a JSON text (strings' contents ignored), without
    parsing it: a bound checked before any parser recurses."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in document:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return deepest
