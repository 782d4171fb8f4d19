"""List parameters and opaque cursors.

A cursor is the keyset position where the previous page ended, ``(created_at, id)``, encoded
as url-safe base64 so clients treat it as opaque. Handlers declare ``limit: Limit = 50`` and
``cursor: CursorParam = None`` and call ``decode_cursor`` / ``encode_cursor`` around the store.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Annotated

from litestar.params import QueryParameter

from app.domain.errors import FieldError, ValidationFailed
from app.store.paging import Position

DEFAULT_LIMIT = 50
MAX_LIMIT = 500

Limit = Annotated[
    int,
    QueryParameter(
        ge=1,
        le=MAX_LIMIT,
        description=f"Page size, 1-{MAX_LIMIT}.",
        examples=[],
    ),
]
CursorParam = Annotated[
    str | None,
    QueryParameter(
        max_length=200,
        description="Opaque cursor from the previous page's `next_cursor`; omit it for the "
        "first page.",
    ),
]


def encode_cursor(position: Position | None) -> str | None:
    if position is None:
        return None
    raw = f"{position.created_at.isoformat()}|{position.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> Position | None:
    """The position in ``cursor``; 422 (field ``cursor``) when it is not one we issued."""
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created_at, _, key = raw.partition("|")
        when = datetime.fromisoformat(created_at)
        if when.tzinfo is None or not key:
            raise ValueError(raw)
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise ValidationFailed(
            [FieldError("cursor", "is not a cursor returned by this list")]
        ) from exc
    return Position(when, key)
