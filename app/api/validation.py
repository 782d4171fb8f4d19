"""Request bodies in: content type, size, nesting depth, JSON syntax, then the msgspec struct,
all errors at once (``app.api.field_errors`` lists every invalid field when the fast strict
decode fails)."""

from __future__ import annotations

import itertools
import re
from typing import TypeVar

import msgspec

from app.api.field_errors import all_errors, field_error
from app.domain.errors import (
    FieldError,
    MalformedJson,
    PayloadTooLarge,
    UnsupportedMediaType,
    ValidationFailed,
)

MAX_BODY_BYTES = 256 * 1024
#: Deepest nesting of arrays and objects accepted. The deepest valid body needs 3 levels (a
#: binding's ``tolerations[i]``); the decoder recurses once per level, so depth is refused first.
MAX_JSON_DEPTH = 32
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_A_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")

S = TypeVar("S", bound=msgspec.Struct)


def check_content_type(content_type: str | None) -> None:
    """415 unless the body is declared as JSON (``application/json`` or ``application/*+json``)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != "application/json" and not (
        media.startswith("application/") and media.endswith("+json")
    ):
        raise UnsupportedMediaType(
            f"Send the body as JSON with Content-Type: application/json (got {media or 'none'})."
        )


def check_size(size: int) -> None:
    if size > MAX_BODY_BYTES:
        raise PayloadTooLarge(
            f"The request body is {size} bytes; at most {MAX_BODY_BYTES} are accepted."
        )


def json_depth(raw: bytes) -> int:
    """How deeply arrays and objects nest in ``raw`` (brackets inside strings do not count)."""
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_A_BRACKET)
    steps = (1 if byte in b"[{" else -1 for byte in brackets)
    return max(itertools.accumulate(steps, initial=0))


def check_depth(raw: bytes) -> None:
    """422 when the body nests deeper than any valid body, before anything decodes it."""
    few_brackets = raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH  # the usual case, in C
    if not few_brackets and json_depth(raw) > MAX_JSON_DEPTH:
        raise ValidationFailed(
            [
                FieldError(
                    "body", f"must not nest arrays and objects more than {MAX_JSON_DEPTH} deep"
                )
            ]
        )


def decode_body(raw: bytes, struct_type: type[S]) -> S:
    """The body as ``struct_type``; 400 malformed-json or 422 listing every invalid field."""
    check_size(len(raw))
    check_depth(raw)
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise MalformedJson(f"The request body is not valid JSON: {exc}.") from exc
    # JSON can carry NUL (written as \u0000); PostgreSQL text cannot store it.
    if b"\\u0000" in raw and (paths := _paths_with_nul(value, "")):
        raise ValidationFailed([FieldError(path, NUL_MESSAGE) for path in paths])
    try:
        return msgspec.convert(value, struct_type)
    except msgspec.ValidationError as exc:
        errors = all_errors(value, struct_type) or [field_error("", exc)]
        raise ValidationFailed(errors) from exc


NUL_MESSAGE = "must not contain the NUL character (\\u0000)"


def _paths_with_nul(value: object, path: str) -> list[str]:
    """Dotted paths of every string (key or value) in ``value`` that contains NUL."""
    if isinstance(value, str):
        return [path or "body"] if "\x00" in value else []
    if isinstance(value, dict):
        found: list[str] = []
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            found += [child] if "\x00" in str(key) else _paths_with_nul(item, child)
        return found
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _paths_with_nul(item, f"{path}.{i}")]
    return []
