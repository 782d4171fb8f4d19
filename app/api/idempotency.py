"""``Idempotency-Key`` on creates: the same key and body within 24 h replays the first answer.

``respond_once`` wraps a create. Inside ONE transaction it claims the key, runs the create,
encodes the response and stores it with the key, so the key and the created resource commit
(or roll back) together. A replay answers the stored status, body and ``Location`` with
``Idempotent-Replayed: true``; the same key with a different body (or path) is 422
``idempotency-key-reused``. Keys are scoped to the caller's identity. Errors are not stored:
a request that failed may be retried with the same key.

A replay answers the first response only while the resource it created is still there: once
that resource was deleted or its deletion requested (a token: revoked), the replay is 410
``created-resource-gone``, so a client never reads a 202 for something that no longer exists.
It is not created again: the key stood for that one create, and a client that wants a new
resource sends a new key.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
from litestar import Request, Response
from litestar.params import HeaderParameter

from app.domain.errors import CreatedResourceGone, FieldError, ValidationFailed
from app.domain.text import control_problem
from app.store import idempotency
from app.store.db import Connection, Database

if TYPE_CHECKING:
    from app.api.auth import Caller
    from app.store.idempotency import CreatedKind, StoredResponse

MAX_KEY_LENGTH = 255


@dataclass(frozen=True)
class Created:
    """What a create made: the response struct, its Location, and which resource it is."""

    resource: Any
    location: str | None
    kind: CreatedKind
    id: uuid.UUID | str

    @property
    def uuid(self) -> uuid.UUID:
        return self.id if isinstance(self.id, uuid.UUID) else uuid.UUID(self.id)


Create = Callable[[Connection], Awaitable[Created]]
"""Runs the write on the given connection; returns what it created."""

_NOUNS: dict[str, str] = {
    "project": "Project",
    "pool": "Compute pool",
    "workload": "Workload",
    "service": "Service",
    "token": "Token",
}

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


def checked_key(request: Request[Any, Any, Any]) -> str | None:
    """The request's ``Idempotency-Key``, once it is 1 to 255 characters without control
    characters (else 422 naming the header); None without one."""
    key = request.headers.get("idempotency-key")
    if key is not None and not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise ValidationFailed(
            [FieldError("Idempotency-Key", f"must be 1 to {MAX_KEY_LENGTH} characters")],
            location="header",
        )
    if key is not None and (problem := control_problem(key)):
        raise ValidationFailed([FieldError("Idempotency-Key", problem)], location="header")
    return key


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
    key = checked_key(request)
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
                await _check_still_there(conn, stored)
                return _response(stored.status, stored.body, stored.location, replayed=True)
        created = await create(conn)
        encoded = _encoder.encode(created.resource)
        if key is not None:
            kept = _encoder.encode(redact(created.resource)) if redact else encoded
            await idempotency.store(
                conn,
                identity=caller.identity,
                key=key,
                status=status,
                body=kept,
                location=created.location,
                resource_kind=created.kind,
                resource_id=created.uuid,
            )
    return _response(status, encoded, created.location, replayed=False)


async def _check_still_there(conn: Connection, stored: StoredResponse) -> None:
    """410 ``created-resource-gone`` when what the key created is deleted, being deleted or
    revoked (see the module docstring)."""
    if stored.resource_kind is None or stored.resource_id is None:
        return  # stored before resources were recorded: replayed as it was
    state = await idempotency.resource_state(conn, stored.resource_kind, stored.resource_id)
    if state == "live":
        return
    noun = _NOUNS[stored.resource_kind]
    name = msgspec.json.decode(stored.body).get("name", "")
    if stored.resource_kind == "token":
        what = "has since been revoked"
    elif state == "deleting":
        what = "is being deleted"
    else:
        what = "has since been deleted"
    raise CreatedResourceGone(
        f"{noun} {name!r}, which this Idempotency-Key created, {what}; send the request with "
        "a new Idempotency-Key to create it again."
    )
