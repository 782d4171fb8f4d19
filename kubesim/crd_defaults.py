"""Structural defaulting of custom resources: the CRD schema's `default` values, applied as the
apiserver does on every write — a missing property with a default gets it, then defaulting
descends into objects and list items that exist (including ones just defaulted)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesim.patching import clone_value
from kubesim.validation import schema_for

if TYPE_CHECKING:
    from kubesim.model import Obj, ResourceType


def _default(schema: dict[str, Any], value: Any) -> None:
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for item in value:
                _default(items, item)
        return
    if not isinstance(value, dict):
        return
    for name, sub in (schema.get("properties") or {}).items():
        if name not in value and "default" in sub:
            value[name] = clone_value(sub["default"])
        if name in value:
            _default(sub, value[name])


def apply_crd_defaults(rt: ResourceType, obj: Obj) -> None:
    """Fill in `obj`'s schema defaults in place (custom resources only)."""
    if rt.is_custom:
        _default(schema_for(rt), obj)
