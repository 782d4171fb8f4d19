"""The one exception handler: every error leaves the API as an RFC 9457 problem.

Domain errors (``app.domain.errors``) carry their own slug, status and extension members.
Litestar's own exceptions are first translated into domain errors (route not found → not-found,
query parameter validation → validation-error, body too large → payload-too-large, ...). Database
connection failures become 503 with ``Retry-After``. Anything else is a bug: 500 with the
request id, logged with its stack trace, and nothing about it in the response.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.exceptions import NotFoundException as RouteNotFound

from app.api.field_errors import humanize
from app.api.field_labels import field_label
from app.domain.errors import (
    AicpError,
    FieldError,
    MalformedJson,
    NotFound,
    PayloadTooLarge,
    ServiceUnavailable,
    StoreUnavailable,
    TooManyRequests,
    TooManyStreams,
    ValidationFailed,
)
from app.observability.logs import request_id_var
from app.observability.metrics import VALIDATION_ERRORS
from app.store.db import is_unavailable

PROBLEM_BASE = "https://aicp.dev/problems/"
PROBLEM_MEDIA_TYPE = "application/problem+json"

log = logging.getLogger(__name__)


class _GenericHttpProblem(AicpError):
    """The request cannot be served."""

    def __init__(self, status: int, slug: str, title: str, detail: str) -> None:
        self._status, self._slug, self._title = status, slug, title
        super().__init__(detail)


def _from_litestar(exc: HTTPException) -> AicpError:
    if isinstance(exc, ValidationException):
        return ValidationFailed(_litestar_field_errors(exc.extra), location=_location(exc.extra))

    if isinstance(exc, RouteNotFound):
        return NotFound("No such resource.")
    if exc.status_code == 413:
        return PayloadTooLarge()
    if exc.status_code == 400:
        return MalformedJson()
    slug = {405: "method-not-allowed"}.get(exc.status_code, f"http-{exc.status_code}")
    return _GenericHttpProblem(exc.status_code, slug, exc.detail, exc.detail)


def _reported(extra: Any) -> list[dict[str, Any]]:
    """Litestar's invalid-value entries, without the one it reports by mistake.

    Litestar re-checks each declared parameter alone to list the failures and reports one it
    was not handed (a KeyError, message "'project'") as failing too — seen once the OpenAPI
    document has been built. Not the caller's error.
    """
    items = [item for item in (extra if isinstance(extra, list) else []) if isinstance(item, dict)]
    return [
        item
        for item in items
        if str(item.get("message", "")) != repr(str(item.get("key") or "body"))
    ]


def _location(extra: Any) -> str:
    """Where Litestar found the invalid values: query, header, path, body, or several."""
    sources = {str(getattr(item.get("source"), "value", item.get("source")) or "body")
               for item in _reported(extra)}  # fmt: skip
    return sources.pop() if len(sources) == 1 else "request"


def _litestar_field_errors(extra: Any) -> list[FieldError]:
    errors = [
        FieldError(str(item.get("key") or "body"), humanize(str(item.get("message", "is invalid"))))
        for item in _reported(extra)
    ]
    return errors or [FieldError("body", "is invalid")]


def _count_validation_errors(error: ValidationFailed) -> None:
    for field_error in error.errors:
        VALIDATION_ERRORS.labels(field=field_label(field_error.field, field_error.message)).inc()


def problem_response(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    """Map any exception to a problem response (registered for ``Exception``)."""
    error: AicpError
    if isinstance(exc, AicpError):
        error = exc
    elif isinstance(exc, HTTPException):
        error = _from_litestar(exc)
    elif is_unavailable(exc):
        error = StoreUnavailable()
    else:
        log.error("unhandled error serving %s %s", request.method, request.url.path, exc_info=exc)
        error = AicpError("An internal error occurred; quote the request id when reporting it.")

    if isinstance(error, _GenericHttpProblem):
        status, slug, title = error._status, error._slug, error._title
    else:
        status, slug, title = error.status, error.slug, error.problem_title()
    request_id = request_id_var.get()
    body: dict[str, Any] = {
        "type": PROBLEM_BASE + slug,
        "title": title,
        "status": status,
        "detail": error.detail,
        "instance": request.url.path,
    }
    if status >= 500 and request_id:
        body["request_id"] = request_id
    body.update(error.extensions())
    headers: dict[str, str] = {}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="aicp"'
    if isinstance(error, ServiceUnavailable | TooManyStreams | TooManyRequests):
        headers["Retry-After"] = str(error.retry_after_seconds)
    if isinstance(error, ValidationFailed):
        _count_validation_errors(error)
    return Response(
        content=msgspec.json.encode(body),
        status_code=status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=headers,
    )
