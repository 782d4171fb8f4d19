"""Request bodies in: content type, size, JSON syntax, then the msgspec struct, all errors at once.

msgspec stops at the first error; a user fixing a request wants all of them. When the fast
strict decode fails, the body is checked again field by field (unknown fields, missing required
fields, and each present field against its own annotated type) to list every invalid field with
a dotted path (``quota.cpu``, ``tolerations.0.effect``) and a message in plain words.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, TypeVar

import msgspec

from app.domain.errors import (
    FieldError,
    MalformedJson,
    PayloadTooLarge,
    UnsupportedMediaType,
    ValidationFailed,
)
from app.domain.specs import NAME_PATTERN

MAX_BODY_BYTES = 256 * 1024
#: Deepest nesting of arrays and objects accepted. The deepest valid body needs 3 levels (a
#: binding's ``tolerations[i]``); the decoder recurses once per level, so depth is refused first.
MAX_JSON_DEPTH = 32
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_A_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")

S = TypeVar("S", bound=msgspec.Struct)

_AT = re.compile(r"^(?P<msg>.*?)(?: - at `(?P<path>[^`]*)`)?$", re.DOTALL)
_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^Object contains unknown field `(?P<f>[^`]*)`$"), "unknown field"),
    (re.compile(r"^Object missing required field `(?P<f>[^`]*)`$"), "is required"),
    (re.compile(r"^Expected `(?:int|float|number)` <= (?P<n>\S+)$"), "must be at most {n}"),
    (re.compile(r"^Expected `(?:int|float|number)` >= (?P<n>\S+)$"), "must be at least {n}"),
    (re.compile(r"^Expected `str` of length <= (?P<n>\d+)$"), "must be at most {n} characters"),
    (re.compile(r"^Expected `str` of length >= (?P<n>\d+)$"), "must be at least {n} characters"),
    (
        re.compile(r"^Expected `(?:array|object)` of length <= (?P<n>\d+)$"),
        "must have at most {n} entries",
    ),
    (
        re.compile(r"^Expected `(?:array|object)` of length >= (?P<n>\d+)$"),
        "must have at least {n} entries",
    ),
    (re.compile(r"^Expected `str` matching regex (?P<r>.*)$"), "must match {r}"),
    (
        re.compile(r"^Expected `(?P<want>[^`]*)`, got `(?P<got>[^`]*)`$"),
        "must be of type {want}, got {got}",
    ),
    (re.compile(r"^Invalid enum value (?P<v>.*)$"), "{v} is not one of the allowed values"),
]
_NAME_MESSAGE = (
    "must be a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a "
    "letter or digit"
)


def humanize(message: str) -> str:
    """A msgspec/Litestar message ("Expected `int` <= 64") in plain words ("must be at most 64")."""
    located = _AT.match(message)
    if located is not None:
        message = located.group("msg")
    for pattern, template in _RULES:
        match = pattern.match(message)
        if match:
            if "r" in match.groupdict() and NAME_PATTERN in match.group("r"):
                return _NAME_MESSAGE
            return template.format(**{k: v for k, v in match.groupdict().items() if k != "f"})
    return message


def _dotted(path: str | None) -> str:
    """``$.quota.cpu`` → ``quota.cpu``; ``$.tolerations[0].effect`` → ``tolerations.0.effect``."""
    if not path:
        return ""
    path = path.removeprefix("$").lstrip(".")
    path = re.sub(r"\[\.\.\.\]", "", path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    return path.lstrip(".")


def field_error(prefix: str, exc: msgspec.ValidationError) -> FieldError:
    """One FieldError from a msgspec error raised while converting the value at ``prefix``."""
    match = _AT.match(str(exc))
    assert match is not None
    raw, path = match.group("msg"), _dotted(match.group("path"))
    field = ".".join(part for part in (prefix, path) if part)
    named = re.match(r"^Object (?:contains unknown|missing required) field `([^`]*)`$", raw)
    if named:
        field = ".".join(part for part in (field, named.group(1)) if part)
    return FieldError(field or "body", humanize(raw))


def _all_errors(value: Any, struct_type: type[msgspec.Struct]) -> list[FieldError]:
    if not isinstance(value, dict):
        return [FieldError("body", f"must be a JSON object, got {type(value).__name__}")]
    fields = {field.encode_name: field for field in msgspec.structs.fields(struct_type)}
    errors = [FieldError(key, "unknown field") for key in value if key not in fields]
    for name, field in fields.items():
        if name not in value:
            if field.required:
                errors.append(FieldError(name, "is required"))
            continue
        try:
            msgspec.convert(value[name], field.type)
        except msgspec.ValidationError as exc:
            errors.append(field_error(name, exc))
    return errors


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
        errors = _all_errors(value, struct_type) or [field_error("", exc)]
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
