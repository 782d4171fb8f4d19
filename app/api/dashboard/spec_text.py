"""The submit view's spec editor: a workload spec pasted as YAML or JSON, read on the server.

``POST /projects/{project}/spec-text`` takes the text as the request body (``text/plain``, at
most ``MAX_SPEC_BYTES``) and answers ``{"spec": {...}}``: the text as a JSON object, which the
script then submits to ``POST /api/v1/projects/{project}/workloads`` like the form's fields, so
the API validates it exactly as it validates any client's body and nothing is created while a
field is wrong. Text that is neither JSON nor YAML is 422 with one sentence (where the reader
stopped), never a 500. YAML is read with ``yaml.safe_load``'s loader (no Python objects) and
without anchors and aliases: a few lines of aliases can stand for gigabytes once written out.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

import yaml
from litestar import Request, post

from app.api import auth
from app.domain.errors import FieldError, PayloadTooLarge, ValidationFailed

if TYPE_CHECKING:
    from yaml.nodes import Node

#: A spec larger than this is not a workload spec (the API's own bodies stop at 256 KiB).
MAX_SPEC_BYTES = 64 * 1024
FIELD = "spec"


class _NoAliasLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses anchors and aliases."""

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(
                None, None, "anchors and aliases are not accepted", event.start_mark
            )
        return super().compose_node(parent, index)


def _unreadable(message: str) -> ValidationFailed:
    return ValidationFailed([FieldError(FIELD, message)], f"The spec could not be read: {message}")


def _plain(value: Any) -> Any:
    """YAML's dates and timestamps as their ISO text (a spec has none; the API then says so)."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def read_spec(text: str) -> dict[str, Any]:
    """The pasted text as a spec object: JSON when it starts with `{`, YAML otherwise."""
    if not text.strip():
        raise _unreadable("it is empty; paste a spec as YAML or JSON.")
    if text.lstrip().startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            raise _unreadable(
                f"not valid JSON at line {error.lineno}, column {error.colno}: {error.msg}."
            ) from None
    else:
        try:
            value = yaml.load(text, Loader=_NoAliasLoader)  # a SafeLoader: plain data only
        except yaml.MarkedYAMLError as error:
            mark = error.problem_mark or error.context_mark
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = str(error.problem or error.context or "unreadable").rstrip(".")
            raise _unreadable(f"not valid YAML{where}: {problem}.") from None
        except yaml.YAMLError as error:
            raise _unreadable(f"not valid YAML: {str(error).rstrip('.')}.") from None
    if not isinstance(value, dict):
        shown = "a list" if isinstance(value, list) else f"a single {type(value).__name__}"
        raise _unreadable(
            f"it is {shown}, not a mapping of fields (name, compute_pool, image, ...)."
        )
    spec: dict[str, Any] = _plain(value)
    return spec


@post("/projects/{project:str}/spec-text", include_in_schema=False, status_code=200)
async def spec_text(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """Read a pasted spec (the session's CSRF header, like every write); create nothing."""
    caller = await auth.authenticate(request)
    await auth.scope(request, caller)
    raw = await request.body()
    if len(raw) > MAX_SPEC_BYTES:
        raise PayloadTooLarge(
            f"The spec is {len(raw)} bytes; at most {MAX_SPEC_BYTES} are accepted."
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _unreadable("it is not UTF-8 text.") from None
    return {"spec": read_spec(text)}


ROUTES = [spec_text]
