"""List parameters and opaque cursors bound to the list that issued them.

A cursor is the keyset position where the previous page ended, ``(created_at, id)``, plus an
HMAC-SHA256 tag over that position *and the list's identity*: the resource listed, the project,
the filters and who may see what (see each handler's ``paging.list(...)``). A cursor that was
tampered with, truncated, or issued by another list (another project, another resource,
other filters) fails the tag check and is a 422 naming ``cursor``; it never reaches the query.

The key is derived from the platform admin token, which every replica of one installation is
configured with, so any replica accepts any replica's cursors; replacing the admin token makes
outstanding cursors invalid (clients start again from the first page). Without an admin token
(tests that build the API alone) the key is random per process.

Handlers declare ``limit: Limit = DEFAULT_LIMIT``, ``cursor: CursorParam = None`` and ``paging:
PagingDep``; ``page = paging.list("workloads", project.id, ...)`` then gives ``page.after(cursor)``
for the store and ``page.next(position)`` for ``next_cursor``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from datetime import datetime
from typing import Annotated, TypeAlias

from litestar.di import NamedDependency
from litestar.params import QueryParameter

from app.domain.errors import FieldError, ValidationFailed
from app.store.paging import Position
from app.store.workloads import PAGE_BOUND as WORKLOAD_PAGE_BOUND

DEFAULT_LIMIT = 50  # the page size when `?limit=` is absent
MAX_LIMIT = 500

Limit = Annotated[
    int,
    QueryParameter(
        ge=1,
        le=MAX_LIMIT,
        description=f"Page size, 1-{MAX_LIMIT}. A page of workloads also ends at "
        f"{WORKLOAD_PAGE_BOUND.bytes >> 20} MiB of rows, so it may hold fewer items while "
        "`next_cursor` is set.",
        examples=[],
    ),
]
CursorParam = Annotated[
    str | None,
    QueryParameter(
        max_length=300,
        description="Opaque cursor from the previous page's `next_cursor`; omit it for the "
        "first page.",
    ),
]


_TAG_BYTES = 16
_KEY_CONTEXT = b"aicp list cursor v1"
_NOT_OURS = "is not a cursor returned by this list; start again without it"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ListPage:
    """One list's cursors: ``after`` reads the caller's, ``next`` issues the next one."""

    def __init__(self, key: bytes, identity: bytes) -> None:
        self._key, self._identity = key, identity

    def _tag(self, payload: bytes) -> bytes:
        mac = hmac.new(self._key, self._identity + b"\x00" + payload, hashlib.sha256)
        return mac.digest()[:_TAG_BYTES]

    def next(self, position: Position | None) -> str | None:
        if position is None:
            return None
        payload = f"{position.created_at.isoformat()}|{position.id}".encode()
        return f"{_b64(payload)}.{_b64(self._tag(payload))}"

    def after(self, cursor: str | None) -> Position | None:
        """The position in ``cursor``; 422 (field ``cursor``) unless this list issued it."""
        if not cursor:
            return None
        try:
            encoded_payload, _, encoded_tag = cursor.partition(".")
            payload, tag = _unb64(encoded_payload), _unb64(encoded_tag)
            if not hmac.compare_digest(tag, self._tag(payload)):
                raise ValueError("tag")
            created_at, _, key = payload.decode().partition("|")
            when = datetime.fromisoformat(created_at)
            if when.tzinfo is None or not key:
                raise ValueError("position")
        except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
            raise ValidationFailed([FieldError("cursor", _NOT_OURS)], location="query") from exc
        return Position(when, key)


class Paging:
    """Issues and checks the cursors of every list, with one key for the installation."""

    def __init__(self, admin_token: str | None) -> None:
        secret = admin_token.encode() if admin_token else secrets.token_bytes(32)
        self._key = hmac.new(secret, _KEY_CONTEXT, hashlib.sha256).digest()

    def list(self, resource: str, *scope: object) -> ListPage:
        """The cursors of the list of ``resource`` narrowed by ``scope`` (project, filters)."""
        identity = "\x1f".join([resource, *("" if part is None else str(part) for part in scope)])
        return ListPage(self._key, identity.encode())


PagingDep: TypeAlias = NamedDependency[Paging]
"""Cursors for list handlers (``paging.list(...)``)."""
