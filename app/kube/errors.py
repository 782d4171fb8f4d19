"""Kubernetes API failures, translated from kubernetes_asyncio into aicp's error hierarchy.

`KubeError` is an `AicpError` (`app.domain.errors`): one that escapes to the HTTP API is a 502
problem, or a 503 for the two "retry shortly" cases. `code` is what Kubernetes answered.

    KubeError                     any failed call to the Kubernetes API
    ├── Forbidden       403       RBAC does not allow aicp's service account to do this
    ├── NotFound        404       the object (or the route) does not exist
    ├── Conflict        409       stale resourceVersion, AlreadyExists, or a field-manager conflict
    ├── Gone            410       a resourceVersion or continue token fell out of history: relist
    ├── Invalid         400/422   the server refused the request body (see `causes`)
    ├── TooManyRequests 429       throttled; `retry_after` seconds when the server said so
    └── Unavailable     5xx       the server failed, or could not be reached at all

Callers above this package catch these, never `ApiException` or aiohttp errors: `translated()`
wraps every call made through `app.kube` (`raise ... from exc`), and `from_status()` turns an
HTTP status plus a Kubernetes `Status` body into the right class when the response was read raw.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from app.domain.errors import AicpError, ServiceUnavailable

if TYPE_CHECKING:
    from collections.abc import Iterator


class KubeError(AicpError):
    """The Kubernetes API refused or failed a request."""

    slug = "kubernetes-error"
    status = 502
    title = "Kubernetes API error"
    code: int = 0
    """The HTTP status the Kubernetes API answered with (0: no answer at all)."""

    def __init__(
        self,
        message: str | None = None,
        *,
        code: int | None = None,
        reason: str = "",
        causes: list[dict[str, str]] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = self.detail
        if code is not None:
            self.code = code
        self.reason = reason
        self.causes = causes or []
        self.retry_after = retry_after


class Forbidden(KubeError):
    """The Kubernetes API does not allow aicp to do this (check its RBAC role)."""

    code = 403


class NotFound(KubeError):
    """The object does not exist."""

    code = 404


class Conflict(KubeError):
    """The object changed since it was read, already exists, or another manager owns a field."""

    code = 409


class Gone(KubeError):
    """The requested resourceVersion is older than the server's history; list again."""

    code = 410


class Invalid(KubeError):
    """The server refused the request as invalid."""

    code = 422


class TooManyRequests(KubeError, ServiceUnavailable):
    """The Kubernetes API is throttling this client; retry shortly."""

    slug = "service-unavailable"
    status = 503
    title = "Service unavailable"
    code = 429


class Unavailable(KubeError, ServiceUnavailable):
    """The Kubernetes API server failed or could not be reached; retry shortly."""

    slug = "service-unavailable"
    status = 503
    title = "Service unavailable"
    code = 503


_BY_STATUS: dict[int, type[KubeError]] = {
    400: Invalid,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def error_class(status: int) -> type[KubeError]:
    """The class for an HTTP status (5xx and 0 = transport failure are `Unavailable`)."""
    if status >= 500 or status == 0:
        return Unavailable
    return _BY_STATUS.get(status, KubeError)


def from_status(
    status: int, body: bytes | str | None, *, retry_after: str | None = None
) -> KubeError:
    """Build the error for a non-2xx response whose body is (usually) a Kubernetes `Status`."""
    parsed: Any = None
    if body:
        with contextlib.suppress(ValueError):
            parsed = json.loads(body)
    message, reason, causes = "", "", []
    if isinstance(parsed, dict):
        message = str(parsed.get("message") or "")
        reason = str(parsed.get("reason") or "")
        details = parsed.get("details")
        if isinstance(details, dict) and isinstance(details.get("causes"), list):
            causes = [c for c in details["causes"] if isinstance(c, dict)]
    elif body:
        message = body.decode(errors="replace") if isinstance(body, bytes) else body
    cls = error_class(status)
    return cls(
        message or f"HTTP {status}",
        code=status,
        reason=reason,
        causes=causes,
        retry_after=_seconds(retry_after),
    )


def from_api_exception(exc: ApiException) -> KubeError:
    """Translate kubernetes_asyncio's `ApiException` (its body holds the `Status`)."""
    headers: Any = exc.headers or {}
    error = from_status(int(exc.status or 0), exc.body, retry_after=headers.get("Retry-After"))
    if not exc.body and exc.reason:
        error.message = error.detail = str(exc.reason)
        error.args = (error.message,)
    return error


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Re-raise kubernetes_asyncio and transport failures as `KubeError`s (`from` the original)."""
    try:
        yield
    except ApiException as exc:
        raise from_api_exception(exc) from exc
    except (TimeoutError, aiohttp.ClientError, ConnectionError) as exc:
        raise Unavailable(f"cannot reach the Kubernetes API: {exc!r}") from exc


def _seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
