"""``Idempotency-Key`` on creates: the same key and body within 24 h replays the first answer.

``respond_once`` wraps a create. Inside ONE transaction it claims the key, runs the create,
encodes the response and stores it with the key, so the key and the created resource commit
(or roll back) together. A replay answers the stored status, body and ``Location`` with
``Idempotent-Replayed: true``; the same key with a different body (or path) is 422
``idempotency-key-reused``. Keys are scoped to the caller's identity. Errors are not stored:
a request that failed may be retried with the same key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
from litestar import Request, Response
from litestar.params import HeaderParameter

from app.domain.errors import FieldError, ValidationFailed
from app.domain.text import control_problem
from app.store import idempotency
from app.store.db import Connection, Database

if TYPE_CHECKING:
    from app.api.auth import Caller

MAX_KEY_LENGTH = 255

Create = Callable[[Connection], Awaitable[tuple[Any, str | None]]]
"""Runs the write on the given connection; returns (response struct, Location or None)."""

_encoder = msgspec.json.Encoder()

IdempotencyKey = Annotated[
    str | None,
    HeaderParameter(
        name="Idempotency-Key",
        required=False,
        description=f"Any text of 1 to {MAX_KEY_LENGTH} characters. The same key with the same "
        "body within 24 hours replays the first response (`Idempotent-Replayed: true`); with "
        "another body it is 422 idempotency-key-reused. Keys are scoped to the token.",
    ),
]
"""Declares ``Idempotency-Key`` in OpenAPI; ``respond_once`` reads and checks it."""


def _response(status: int, body: bytes, location: str | None, replayed: bool) -> Response[bytes]:
    headers = {"Location": location} if location else {}
    if replayed:
        headers["Idempotent-Replayed"] = "true"
    return Response(
        content=body, status_code=status, media_type="application/json", headers=headers
    )


async def respond_once(
    request: Request[Any, Any, Any],
    db: Database,
    caller: Caller,
    *,
    status: int,
    create: Create,
    redact: Callable[[Any], Any] | None = None,
) -> Response[bytes]:
    """Run ``create`` in one transaction, honouring the request's ``Idempotency-Key``.

    ``redact`` turns the response into what may be stored for replays (token secrets are not).
    """
    key = request.headers.get("idempotency-key")
    if key is not None and not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise ValidationFailed(
            [FieldError("Idempotency-Key", f"must be 1 to {MAX_KEY_LENGTH} characters")],
            location="header",
        )
    if key is not None and (problem := control_problem(key)):
        raise ValidationFailed([FieldError("Idempotency-Key", problem)], location="header")
    body = await request.body()
    request_sha256 = hashlib.sha256(
        request.method.encode() + b" " + request.url.path.encode() + b"\n" + body
    ).digest()
    async with db.transaction() as conn:
        if key is not None:
            stored = await idempotency.claim(
                conn, identity=caller.identity, key=key, request_sha256=request_sha256
            )
            if stored is not None:
                return _response(stored.status, stored.body, stored.location, replayed=True)
        resource, location = await create(conn)
        encoded = _encoder.encode(resource)
        if key is not None:
            kept = _encoder.encode(redact(resource)) if redact else encoded
            await idempotency.store(
                conn,
                identity=caller.identity,
                key=key,
                status=status,
                body=kept,
                location=location,
            )
    return _response(status, encoded, location, replayed=False)
