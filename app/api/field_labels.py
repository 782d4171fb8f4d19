"""Bounded metric label values for the fields named in 422 problems.

A field path in a problem can contain text the caller chose: a label key (``labels.team``), an
env key, a list index, an unknown field's name. Used as a Prometheus label value as it is, any
editor could grow ``/metrics`` (and memory) without limit. ``field_label`` maps every path onto
a finite set known in advance: the fields of the request bodies (list indices dropped, map keys
cut off at the map) and the parameter names the API reads; anything else is ``(other)``.
"""

from __future__ import annotations

import functools

import msgspec
import msgspec.inspect as mi

from app.domain.specs import (
    BindingPut,
    PoolCreate,
    PoolPatch,
    ProjectCreate,
    TokenCreate,
    WorkloadSpec,
)

BODIES: tuple[type[msgspec.Struct], ...] = (
    ProjectCreate,
    TokenCreate,
    BindingPut,
    PoolCreate,
    PoolPatch,
    WorkloadSpec,
)
#: Query, header and path parameters, and the names used for a whole request or body.
PARAMETERS = frozenset(
    {"body", "request", "limit", "cursor", "state", "compute_pool", "tail", "If-Match",
     "Idempotency-Key", "project", "pool", "name", "accelerator_class", "token_id", "query"}
)  # fmt: skip
UNKNOWN_FIELD = "(unknown field)"
OTHER = "(other)"


def _paths(info: mi.Type, prefix: str) -> set[str]:
    """Dotted paths of every struct field reachable from ``info`` (lists looked through)."""
    if isinstance(info, mi.Metadata):
        return _paths(info.type, prefix)
    if isinstance(info, mi.UnionType):
        return {path for member in info.types for path in _paths(member, prefix)}
    if isinstance(info, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
        return _paths(info.item_type, prefix)
    if isinstance(info, mi.StructType):
        found: set[str] = set()
        for field in info.fields:
            path = f"{prefix}.{field.encode_name}" if prefix else field.encode_name
            found |= {path, *_paths(field.type, path)}
        return found
    return set()


@functools.cache
def known_fields() -> frozenset[str]:
    """Every label value ``field_label`` can return."""
    paths = {path for body in BODIES for path in _paths(mi.type_info(body), "")}
    return frozenset(paths | PARAMETERS | {UNKNOWN_FIELD, OTHER})


def field_label(field: str, message: str) -> str:
    """The metric label for one invalid field: a value of ``known_fields()``."""
    if message == "unknown field":
        return UNKNOWN_FIELD
    known = known_fields()
    parts = [part for part in field.split(".") if not part.isdigit()]
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return OTHER
