"""OpenAPI helpers: the problem responses each route documents, schema descriptions, short
operation ids, and event streams described so generated clients do not parse them as JSON.

- Operation ids are the handler's name in camelCase (`list_workloads` → `listWorkloads`), or
  the handler's own `operation_id=` where its name reads badly as a method name.
- A `text/event-stream` answer is documented as a string (a generated client hands it over
  unparsed; read it with an SSE client) whose events' `data:` lines are the named schema's
  documents; a handler whose `opt` has `STREAMS` also answers one (`?watch=true`).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import msgspec
from litestar.enums import RequestEncodingType
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import Example, OpenAPIMediaType, OpenAPIType, Reference, Schema
from litestar.params import BodyKwarg

from app.api.problems import PROBLEM_MEDIA_TYPE
from app.api.watches import MEDIA_TYPE as SSE_MEDIA
from app.domain.resources import Problem

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.handlers import HTTPRouteHandler
    from litestar.openapi.spec import Operation
    from litestar.types import Method

_DESCRIPTIONS = {
    400: "malformed-json: the body is not JSON",
    401: "unauthorized: missing, malformed, unknown, expired or revoked token, or an OpenID "
    "Connect access token that does not verify (the detail says why)",
    403: "forbidden: the token's role is too low (`required_role` names the one needed), or "
    "no role binding matches a signed-in person's groups (`required_role: role-binding`); "
    "csrf-rejected: a dashboard session's write without its X-CSRF-Token header",
    404: "not-found: no such resource visible to this token",
    409: "already-exists, being-deleted, in-use (`referenced_by`), token-limit-reached "
    "(`limit`) or limit-below-allocation (`exceeded`)",
    410: "resume-expired: the changes after Last-Event-ID are no longer kept, reconnect without "
    "it; created-resource-gone: an Idempotency-Key replay whose resource was deleted since",
    412: "generation-mismatch: If-Match differs (`current_generation`)",
    413: "payload-too-large: body over 256 KiB",
    415: "unsupported-media-type: body not sent as application/json",
    422: "validation-error (`errors: [{field, message}]`), exceeds-pool-capacity, "
    "exceeds-node-capacity (`node_capacity`), exceeds-project-limit (`exceeded`) or "
    "idempotency-key-reused",
    429: "too-many-requests: this token's, this project's or this client's rate limit is "
    "spent, or too-many-streams: a limit of open streams or log follows is reached (`limit` "
    "names it); retry after Retry-After seconds",
    503: "service-unavailable: the database, or the identity provider's signing keys for an "
    "unknown key id, unreachable; see Retry-After",
}

#: `opt` key of a handler that also answers an event stream of this struct (`?watch=true`).
STREAMS = "streams"

READ = (401, 404, 422, 429, 503)
WRITE = (400, 401, 403, 404, 409, 413, 415, 422, 429, 503)
DELETE = (401, 403, 404, 409, 412, 422, 429, 503)
CREATE = (*WRITE, 410)
STREAM = (401, 404, 410, 422, 429, 503)


def problems(*statuses: int) -> dict[int, ResponseSpec]:
    """``responses=`` for a route: each status documented as an RFC 9457 problem."""
    return {
        status: ResponseSpec(
            data_container=Problem,
            description=_DESCRIPTIONS[status],
            media_type="application/problem+json",
            generate_examples=False,
        )
        for status in statuses
    }


def success(container: Any, description: str) -> ResponseSpec:
    """A success response whose handler returns pre-encoded bytes (idempotent creates)."""
    return ResponseSpec(data_container=container, description=description, generate_examples=False)


def stream_of(container: type) -> ResponseSpec:
    """A `text/event-stream` answer whose events' `data:` lines are `container` documents."""
    return ResponseSpec(
        data_container=container,
        description="Server-Sent Events; each event's `data:` line is one document of this "
        "schema, its `event:` the document's `type`, its `id:` the change number",
        media_type="text/event-stream",
        generate_examples=False,
    )


def short_operation_id(route_handler: HTTPRouteHandler, _method: Method, _path: list[Any]) -> str:
    """`list_workloads` → `listWorkloads`: the handler's name, as a generated method's name."""
    first, *rest = route_handler.handler_name.split("_")
    return first + "".join(word.title() for word in rest)


def json_body(summary: str, value: dict[str, Any]) -> BodyKwarg:
    """A JSON request body marker that documents one example in OpenAPI."""
    return BodyKwarg(
        media_type=RequestEncodingType.JSON,
        examples=[Example(summary=summary, value=value)],
    )


def _struct_docs() -> dict[str, str]:
    """Every msgspec struct's name → the first paragraph of its docstring."""
    docs: dict[str, str] = {}
    pending: list[type[msgspec.Struct]] = [msgspec.Struct]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        own = cls.__dict__.get("__doc__")  # not inherited: a base's docstring says nothing here
        doc = inspect.cleandoc(own) if isinstance(own, str) else ""
        if cls is not msgspec.Struct and doc:
            docs.setdefault(cls.__name__, " ".join(doc.split("\n\n")[0].split()))
    return docs


def describe_components(app: Litestar) -> None:
    """Give each OpenAPI component schema its struct's docstring (Litestar leaves them bare).

    Builds the OpenAPI document now (it is cached and served as built), so call this once the
    app has all its routes.
    """
    docs = _struct_docs()
    schemas = app.openapi_schema.components.schemas or {}
    for name, schema in schemas.items():
        if isinstance(schema, Schema) and not schema.description and name in docs:
            schema.description = docs[name]
    _drop_unsent_responses(app)
    _describe_streams(app)


def _drop_unsent_responses(app: Litestar) -> None:
    """Remove the responses Litestar documents on its own that aicp never sends.

    Litestar adds a ``400`` "Validation Exception" (its own JSON shape) to every operation with
    parameters; aicp answers invalid parameters with a ``422`` problem, and a ``400`` only for
    a body that is not JSON (documented, as a problem, on the routes that take a body).
    """
    for item in (app.openapi_schema.paths or {}).values():
        for method in ("get", "put", "post", "delete", "patch", "head", "options"):
            operation = getattr(item, method, None)
            responses = operation.responses if operation is not None else None
            bad = (responses or {}).get("400")
            content = getattr(bad, "content", None) or {}
            if responses is not None and bad is not None and PROBLEM_MEDIA_TYPE not in content:
                del responses["400"]


def _operations(app: Litestar) -> list[tuple[str, str, Operation]]:
    found = []
    for path, item in (app.openapi_schema.paths or {}).items():
        for method in ("get", "put", "post", "delete", "patch"):
            operation = getattr(item, method, None)
            if operation is not None:
                found.append((path, method, operation))
    return found


def _stream_schema(name: str) -> Schema:
    return Schema(
        type=OpenAPIType.STRING,
        description=f"Server-Sent Events (read with an SSE client, not as JSON): each event's "
        f"`data:` line is one `{name}` document (#/components/schemas/{name}), its `event:` "
        "the document's `type`, its `id:` the change number",
    )


def _describe_streams(app: Litestar) -> None:
    """Every `text/event-stream` answer as a string of events of its schema (see above)."""
    also: dict[tuple[str, str], str] = {}
    for route in app.routes:
        for handler in getattr(route, "route_handlers", []):
            streams = handler.opt.get(STREAMS)
            if streams is not None:
                for method in handler.http_methods:
                    also[(route.path_format, method.lower())] = streams.__name__
    for path, method, operation in _operations(app):
        for status, response in (operation.responses or {}).items():
            content = getattr(response, "content", None)
            if content is None:
                continue
            stream = content.get(SSE_MEDIA)
            if stream is not None and isinstance(stream.schema, Reference):
                content[SSE_MEDIA] = OpenAPIMediaType(
                    schema=_stream_schema(stream.schema.ref.rsplit("/", 1)[-1])
                )
            if status == "200" and (path, method) in also:
                content[SSE_MEDIA] = OpenAPIMediaType(schema=_stream_schema(also[(path, method)]))
