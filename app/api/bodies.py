"""The ``before_request`` hook that checks a request body before Litestar decodes it.

It runs after the auth guard (so an unauthenticated caller gets 401, not 422) and before the
handler's ``data`` is parsed: 415 for a non-JSON content type, 413 over 256 KiB, 400 for broken
JSON, 422 listing every invalid field. Litestar then decodes the same, already valid, body into
the handler's ``data`` struct (whose type is also what OpenAPI documents).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from litestar.openapi.spec import Parameter as OpenAPIParameter

from app.api.validation import check_content_type, check_size, decode_body
from app.domain.errors import FieldError, ValidationFailed

if TYPE_CHECKING:
    from litestar import Request


def _body_type(request: Request[Any, Any, Any]) -> type[msgspec.Struct] | None:
    """The msgspec struct the handler takes as ``data``, if any.

    Read from the handler's parsed signature on every call (a dict lookup): a cache keyed by
    ``id(handler)`` would hand a collected app's body type to a new handler reusing that id.
    """
    data = request.route_handler.parsed_fn_signature.parameters.get("data")
    annotation = data.annotation if data is not None else None
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return annotation
    return None


_QUERY_KEY = "aicp_query_parameters"


def _declared_query(request: Request[Any, Any, Any]) -> set[str] | None:
    """The query parameters the OpenAPI document declares for this route and method."""
    table: dict[tuple[str, str], set[str]] | None = request.app.state.get(_QUERY_KEY)
    if table is None:
        table = {}
        for path, item in (request.app.openapi_schema.paths or {}).items():
            for method in ("get", "put", "post", "delete", "patch"):
                operation = getattr(item, method, None)
                if operation is not None:
                    table[(path, method.upper())] = {
                        parameter.name
                        for parameter in operation.parameters or []
                        if isinstance(parameter, OpenAPIParameter) and parameter.param_in == "query"
                    }
        request.app.state[_QUERY_KEY] = table
    return table.get((str(request.scope.get("path_template")), request.method))


def check_query(request: Request[Any, Any, Any]) -> None:
    """422 naming every query parameter the route does not take (never ignored silently)."""
    declared = _declared_query(request)
    if declared is None:
        return
    unknown = sorted({name for name in request.query_params if name not in declared})
    if unknown:
        supported = ", ".join(sorted(declared)) or "none"
        raise ValidationFailed(
            [
                FieldError(name, f"unknown query parameter (supported: {supported})")
                for name in unknown
            ],
            location="query",
        )


async def check_body(request: Request[Any, Any, Any]) -> None:
    """Reject unknown query parameters and a bad body with the right problem; return None to
    let the handler run."""
    check_query(request)
    struct_type = _body_type(request)
    if struct_type is None:
        return
    length = request.headers.get("content-length")
    if length is not None and length.isdigit():
        check_size(int(length))
    check_content_type(request.headers.get("content-type"))
    decode_body(await request.body(), struct_type)
