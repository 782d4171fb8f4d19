"""Every invalid field of a request body, by dotted path, in plain words.

msgspec stops at the first error; a user fixing a request wants all of them. When the strict
decode fails, ``all_errors`` walks the body against its struct type: unknown fields, missing
required fields, each present field against its own annotated type, nested structs and lists of
structs field by field (``quota.cpu``, ``tolerations.0.effect``), and, for fields whose type
holds, the rules msgspec cannot express (``app.domain.validation.FIELD_RULES``: quantities,
label syntax, image references, ...), so one answer lists everything.

Messages never show library wording or internal patterns: ``humanize`` turns msgspec's and
Litestar's messages into sentences ("must be at most 64", "must be one of low, normal, high",
"must be a string, got an integer"), and anything it does not recognise reads "is invalid".
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any, Literal

import msgspec

from app.domain.errors import FieldError
from app.domain.specs import ENV_KEY_PATTERN, NAME_PATTERN, PRINTABLE_PATTERN
from app.domain.validation import FIELD_RULES

_AT = re.compile(r"^(?P<msg>.*?)(?: - at `(?P<path>[^`]*)`)?$", re.DOTALL)
_JSON_TYPES = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "number": "a number",
    "bool": "true or false",
    "object": "an object",
    "array": "an array",
    "null": "null",
}
_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^Object contains unknown field `(?P<f>[^`]*)`$"), "unknown field"),
    (re.compile(r"^Object missing required field `(?P<f>[^`]*)`$"), "is required"),
    (re.compile(r"^Missing required \w+ parameter '(?P<f>[^']*)'.*$"), "is required"),
    (re.compile(r"^Expected `(?:int|float|number)` <= (?P<n>\S+)$"), "must be at most {n}"),
    (re.compile(r"^Expected `(?:int|float|number)` >= (?P<n>\S+)$"), "must be at least {n}"),
    (re.compile(r"^Expected `(?:int|float|number)` < (?P<n>\S+)$"), "must be less than {n}"),
    (re.compile(r"^Expected `(?:int|float|number)` > (?P<n>\S+)$"), "must be more than {n}"),
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
]
_TYPE = re.compile(r"^Expected `(?P<want>[^`]*)`, got `(?P<got>[^`]*)`$")
_REGEX = re.compile(r"^Expected `str` matching regex (?P<r>.*)$")
_PATTERNS = {
    NAME_PATTERN: "must be a DNS-1123 label: lowercase letters, digits and '-', starting and "
    "ending with a letter or digit",
    PRINTABLE_PATTERN: "must not contain whitespace or control characters",
    ENV_KEY_PATTERN: "must be a C identifier: letters, digits and '_', not starting with a digit",
}
INVALID = "is invalid"


def _json_type(name: str) -> str:
    return " or ".join(_JSON_TYPES.get(part.strip(), "a value") for part in name.split("|"))


def humanize(message: str) -> str:
    """A msgspec/Litestar message ("Expected `int` <= 64") in plain words ("must be at most 64")."""
    located = _AT.match(message)
    if located is not None:
        message = located.group("msg")
    for pattern, template in _RULES:
        match = pattern.match(message)
        if match:
            return template.format(**{k: v for k, v in match.groupdict().items() if k != "f"})
    if match := _TYPE.match(message):
        return f"must be {_json_type(match['want'])}, got {_json_type(match['got'])}"
    if match := _REGEX.match(message):
        regex = match["r"].strip("'").replace("\\\\", "\\")  # msgspec quotes it as a repr
        return _PATTERNS.get(regex, "has an invalid format")
    return INVALID


def _dotted(path: str | None) -> str:
    """``$.quota.cpu`` → ``quota.cpu``; ``$.tolerations[0].effect`` → ``tolerations.0.effect``."""
    if not path:
        return ""
    path = path.removeprefix("$").lstrip(".")
    path = re.sub(r"\[\.\.\.\]", "", path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    return path.lstrip(".")


def _join(*parts: str) -> str:
    return ".".join(part for part in parts if part)


def _unwrap(tp: Any) -> Any:
    """``Annotated[X, ...]`` → X; ``X | None`` → X (what a value must be when present)."""
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        if len(members) == 1:
            return _unwrap(members[0])
    return tp


def field_error(prefix: str, exc: msgspec.ValidationError, tp: Any = None) -> FieldError:
    """One FieldError from a msgspec error raised while converting the value at ``prefix``."""
    match = _AT.match(str(exc))
    assert match is not None
    raw, path = match.group("msg"), _dotted(match.group("path"))
    field = _join(prefix, path)
    named = re.match(r"^Object (?:contains unknown|missing required) field `([^`]*)`$", raw)
    if named:
        field = _join(field, named.group(1))
    inner = _unwrap(tp)
    if raw.startswith("Invalid enum value") and typing.get_origin(inner) is Literal:
        allowed = ", ".join(str(value) for value in typing.get_args(inner))
        return FieldError(field or "body", f"must be one of {allowed}")
    return FieldError(field or "body", humanize(raw))


def _list_item(tp: Any) -> Any:
    inner = _unwrap(tp)
    if typing.get_origin(inner) is list:
        return typing.get_args(inner)[0]
    return None


def _is_struct(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, msgspec.Struct)


def _value_errors(
    value: Any, tp: Any, path: str, owner: type | None, name: str
) -> list[FieldError]:
    try:
        converted = msgspec.convert(value, tp)
    except msgspec.ValidationError as exc:
        first = field_error(path, exc, tp)
        inner, item = _unwrap(tp), _list_item(tp)
        if _is_struct(inner) and isinstance(value, dict):
            return struct_errors(value, inner, path) or [first]
        if item is not None and _is_struct(_unwrap(item)) and isinstance(value, list):
            nested = [
                error
                for index, element in enumerate(value)
                for error in _value_errors(element, item, _join(path, str(index)), None, "")
            ]
            own = [first] if first.field == path else []  # the list itself (its length)
            return own + nested if nested else [first]
        return [first]
    rule = FIELD_RULES.get((owner, name)) if owner is not None else None
    return [FieldError(field, message) for field, message in rule(path, converted)] if rule else []


def struct_errors(
    value: dict[str, Any], struct_type: type[msgspec.Struct], prefix: str = ""
) -> list[FieldError]:
    """Every invalid field of ``value`` read as ``struct_type`` (paths under ``prefix``)."""
    fields = {field.encode_name: field for field in msgspec.structs.fields(struct_type)}
    errors = [FieldError(_join(prefix, key), "unknown field") for key in value if key not in fields]
    for name, field in fields.items():
        path = _join(prefix, name)
        if name not in value:
            if field.required:
                errors.append(FieldError(path, "is required"))
            continue
        errors += _value_errors(value[name], field.type, path, struct_type, name)
    return errors


def all_errors(value: Any, struct_type: type[msgspec.Struct]) -> list[FieldError]:
    """Every invalid field of a decoded JSON body that failed to convert to ``struct_type``."""
    if not isinstance(value, dict):
        return [FieldError("body", f"must be an object, got {_json_type(_kind(value))}")]
    return struct_errors(value, struct_type)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    return {list: "array", str: "str", int: "int", float: "float"}.get(type(value), "value")
