"""``If-Match: "<generation>"`` on PUT, PATCH and DELETE of reconciled resources."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypeVar

from litestar import Response
from litestar.params import HeaderParameter

from app.domain.errors import FieldError, ValidationFailed

if TYPE_CHECKING:
    from litestar.connection import ASGIConnection

_ETAG = re.compile(r'\s*(?:W/)?"?(\d{1,18})"?\s*')


IfMatch = Annotated[
    str | None,
    HeaderParameter(
        name="If-Match",
        required=False,
        description='The generation you read, in quotes (`"3"`, as the ETag header gives it), '
        "or `*`: the write is refused with 412 generation-mismatch if the resource has moved on.",
    ),
]
"""Declares ``If-Match`` in OpenAPI; ``expected_generation`` reads it, and the store compares it
with the locked row (``app.domain.errors.check_generation``)."""


def expected_generation(request: ASGIConnection[Any, Any, Any, Any]) -> int | None:
    """The generation the client says it read, or None without ``If-Match`` (or with ``*``)."""
    header = request.headers.get("if-match")
    if header is None or header.strip() == "*":
        return None
    match = _ETAG.fullmatch(header)
    if match is None:
        raise ValidationFailed(
            [FieldError("If-Match", 'must be a generation in quotes, like "3"')], location="header"
        )
    return int(match.group(1))


def etag(generation: int) -> str:
    """The ``ETag`` header value for a resource at ``generation``."""
    return f'"{generation}"'


class Versioned(Protocol):
    """A reconciled resource: its ``generation`` is its ``ETag``."""

    @property
    def generation(self) -> int: ...


V = TypeVar("V", bound=Versioned)


def versioned(resource: V, status: int = 200) -> Response[V]:
    """``resource`` answered with ``status`` and its generation as ``ETag``."""
    return Response(resource, status_code=status, headers={"ETag": etag(resource.generation)})
