"""The OpenID Connect verifier against a local issuer (tests/support/issuer.py): locally
generated keys, a real loopback HTTP server for discovery and JWKS.

Every bad token is `Unauthorized` (401) with a sentence; the issuer down with an unknown key is
`IssuerUnavailable` (503 with Retry-After); claims are explored with hypothesis.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.domain.errors import Unauthorized
from app.identity.keys import IssuerUnavailable, KeyCache
from app.identity.verifier import OidcConfig, Verifier, json_depth
from tests.support.issuer import AUDIENCE, LocalIssuer, SigningPair, ec_pair, rsa_pair

LEEWAY = 30
REFRESH = 60.0


@pytest.fixture(scope="module")
def pair() -> SigningPair:
    return rsa_pair("key-1")


@pytest.fixture
def issuer(pair: SigningPair) -> Iterator[LocalIssuer]:
    local = LocalIssuer(published=[pair])
    local.start()
    yield local
    local.stop()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def verifier(issuer: LocalIssuer, clock: Clock) -> AsyncIterator[Verifier]:
    async with httpx.AsyncClient(timeout=5) as client:
        keys = KeyCache(issuer.url, client, refresh_interval=REFRESH, clock=clock)
        await keys.refresh()
        yield Verifier(
            OidcConfig(issuer=issuer.url, audience=AUDIENCE, leeway_seconds=LEEWAY), keys
        )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _segments(header: dict[str, Any], claims: dict[str, Any]) -> str:
    return _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(claims).encode())


async def _refused(verifier: Verifier, token: str, says: str) -> None:
    with pytest.raises(Unauthorized) as refused:
        await verifier.verify(token)
    assert says in refused.value.detail, refused.value.detail


async def test_a_good_token_names_the_person_and_their_groups(
    verifier: Verifier, issuer: LocalIssuer, pair: SigningPair
) -> None:
    identity = await verifier.verify(issuer.mint(pair))
    assert (identity.subject, identity.username, identity.groups) == (
        "subject-1",
        "bob",
        ("vision-team",),
    )


async def test_an_es256_key_verifies_too(issuer: LocalIssuer, clock: Clock) -> None:
    ec_key = ec_pair("ec-1")
    issuer.published.append(ec_key)
    async with httpx.AsyncClient(timeout=5) as client:
        keys = KeyCache(issuer.url, client, refresh_interval=REFRESH, clock=clock)
        verifier = Verifier(OidcConfig(issuer=issuer.url, audience=AUDIENCE), keys)
        assert (await verifier.verify(issuer.mint(ec_key))).username == "bob"


async def test_every_bad_token_is_refused_with_a_reason(
    verifier: Verifier, issuer: LocalIssuer, pair: SigningPair
) -> None:
    now = int(time.time())
    impostor = rsa_pair(pair.kid)  # another key under the published key's id
    await _refused(verifier, issuer.mint(impostor), "signature does not verify")
    await _refused(
        verifier, issuer.mint(pair, issuer.claims(exp=now - 120, iat=now - 600)), "expired"
    )
    await _refused(verifier, issuer.mint(pair, issuer.claims(nbf=now + 600)), "not valid yet")
    await _refused(verifier, issuer.mint(pair, issuer.claims(iat=now + 600)), "not valid yet")
    await _refused(
        verifier, issuer.mint(pair, issuer.claims(iss="http://elsewhere")), "another identity"
    )
    await _refused(verifier, issuer.mint(pair, issuer.claims(aud="other")), "not meant for")
    await _refused(verifier, issuer.mint(pair, issuer.claims(exp=None)), "'exp'")
    await _refused(verifier, issuer.mint(pair, issuer.claims(sub=None)), "'sub'")
    # alg none, with and without a signature segment.
    unsigned = _segments({"alg": "none", "kid": pair.kid}, issuer.claims())
    await _refused(verifier, unsigned + ".", "not a JSON Web Token")
    await _refused(verifier, unsigned + ".c2ln", "'none' is not accepted")
    # HS256 keyed with the issuer's public key (the algorithm-confusion attack).
    public_pem = pair.private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signing_input = _segments({"alg": "HS256", "kid": pair.kid, "typ": "JWT"}, issuer.claims())
    mac = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    await _refused(verifier, signing_input + "." + _b64(mac), "'HS256' is not accepted")
    # An RSA-PSS token against a key whose JWK says RS256.
    await _refused(verifier, issuer.mint(pair, alg="PS256"), "does not fit")
    await _refused(verifier, issuer.mint(pair, kid="no-such-key"), "does not publish")
    for garbage in ("a.b.c", "not-a-jwt", "x" * 40 + "..", "e30.e30.e30", "!!.??.**"):
        await _refused(verifier, garbage, "")
    huge = issuer.mint(pair, issuer.claims(groups=["g" * 100] * 300))
    await _refused(verifier, huge, "longer than")
    nested: Any = "x"
    for _ in range(50):
        nested = [nested]
    await _refused(verifier, issuer.mint(pair, issuer.claims(extra=nested)), "nests JSON")


async def test_an_unknown_kid_refetches_the_keys_at_most_once_per_interval(
    verifier: Verifier, issuer: LocalIssuer, clock: Clock
) -> None:
    fetched = issuer.jwks_requests  # the fetch at start, just now: no second one yet
    await _refused(verifier, issuer.mint(rsa_pair("made-up")), "does not publish")
    assert issuer.jwks_requests == fetched
    clock.now += REFRESH
    stranger = rsa_pair("made-up")
    for _ in range(20):
        await _refused(verifier, issuer.mint(stranger), "does not publish")
    assert issuer.jwks_requests == fetched + 1
    # A rotated-in key is found once the interval has passed, without a restart.
    rotated = rsa_pair("key-2")
    issuer.published = [rotated]
    await _refused(verifier, issuer.mint(rotated), "does not publish")
    clock.now += REFRESH
    assert (await verifier.verify(issuer.mint(rotated))).username == "bob"
    assert issuer.jwks_requests == fetched + 2


async def test_with_the_issuer_down_cached_keys_verify_and_an_unknown_kid_is_503(
    verifier: Verifier, issuer: LocalIssuer, pair: SigningPair, clock: Clock
) -> None:
    issuer.down = True
    assert (await verifier.verify(issuer.mint(pair))).subject == "subject-1"
    clock.now += REFRESH
    for _ in range(3):  # the refresh fails, then within the interval: 503 without asking again
        with pytest.raises(IssuerUnavailable) as unavailable:
            await verifier.verify(issuer.mint(rsa_pair("new-key")))
        assert 1 <= unavailable.value.retry_after_seconds <= REFRESH + 1
        assert unavailable.value.status == 503


def test_only_asymmetric_algorithms_can_be_configured() -> None:
    for bad in (("HS256",), ("none",), ()):
        with pytest.raises(ValueError, match="asymmetric"):
            OidcConfig(issuer="https://idp", audience="a", algorithms=bad)
    with pytest.raises(ValueError, match="leeway"):
        OidcConfig(issuer="https://idp", audience="a", leeway_seconds=3600)


times = st.integers(min_value=-2000, max_value=2000)
group = st.text(alphabet=st.characters(codec="utf-8"), min_size=0, max_size=40)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    exp=times,
    nbf=st.none() | times,
    iat=times,
    audience=st.sampled_from([AUDIENCE, "other", [AUDIENCE, "x"], ["x"]]),
    groups=st.lists(group, max_size=12) | st.none() | group | st.integers(),
    username=st.none() | st.text(max_size=30) | st.integers(),
)
async def test_a_token_verifies_exactly_when_its_claims_are_within_the_rules(
    verifier: Verifier,
    issuer: LocalIssuer,
    pair: SigningPair,
    exp: int,
    nbf: int | None,
    iat: int,
    audience: Any,
    groups: Any,
    username: Any,
) -> None:
    now = int(time.time())
    claims = issuer.claims(exp=now + exp, iat=now + iat, aud=audience)
    claims.pop("nbf")
    if nbf is not None:
        claims["nbf"] = now + nbf
    claims["groups"] = groups
    claims["preferred_username"] = username
    claims = {k: v for k, v in claims.items() if v is not None}
    margin = 2  # seconds the test itself may take
    in_time = (
        exp > -LEEWAY + margin and iat < LEEWAY - margin and (nbf is None or nbf < LEEWAY - margin)
    )
    boundary = (
        abs(exp + LEEWAY) <= margin
        or abs(iat - LEEWAY) <= margin
        or (nbf is not None and abs(nbf - LEEWAY) <= margin)
    )
    aud_ok = audience == AUDIENCE or (isinstance(audience, list) and AUDIENCE in audience)
    try:
        identity = await verifier.verify(issuer.mint(pair, claims))
    except Unauthorized:
        assert boundary or not (in_time and aud_ok), claims
        return
    assert boundary or (in_time and aud_ok), claims
    assert identity.subject == "subject-1"
    assert identity.username == (
        username if isinstance(username, str) and username else "subject-1"
    )
    expected = [groups] if isinstance(groups, str) else groups if isinstance(groups, list) else []
    assert list(identity.groups) == list(dict.fromkeys(g for g in expected if g))


@given(
    st.recursive(
        st.none() | st.integers() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)
    )
)
def test_json_depth_counts_nesting_ignoring_strings(value: Any) -> None:
    def depth(v: Any) -> int:
        if isinstance(v, list):
            return 1 + max((depth(x) for x in v), default=0)
        if isinstance(v, dict):
            return 1 + max((depth(x) for x in v.values()), default=0)
        return 0

    assert json_depth(json.dumps(value).encode()) == depth(value)
