"""Patch semantics: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge.

All functions are pure: they return a new document and never mutate their inputs.
Errors are `StoreError`s with the codes a real apiserver answers.
"""

from __future__ import annotations

from typing import Any

from kubesim.model import StoreError
from kubesim.tables import clone

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
APPLY_CBOR = "application/apply-patch+cbor"
PATCH_TYPES = (JSON_PATCH, MERGE, STRATEGIC, APPLY)

# Strategic merge: list fields merged by a key (from the Kubernetes API types' patchMergeKey).
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "containerStatuses": "name",
    "addresses": "type",
}
# Strategic merge: primitive lists merged as sets.
SET_LISTS = frozenset({"finalizers"})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, `null` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return clone_value(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def clone_value(value: Any) -> Any:
    if isinstance(value, dict):
        return clone(value)
    if isinstance(value, list):
        return clone({"v": value})["v"]
    return value


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _bad_patch(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _bad_patch(message: str) -> StoreError:
    return StoreError(422, "Invalid", message)


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    cur = doc
    for part in parts[:-1]:
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            raise _bad_patch(f"doc is missing path: /{'/'.join(parts)}")
    return cur, parts[-1]


def _get(doc: Any, parts: list[str]) -> Any:
    if not parts:
        return doc
    parent, last = _parent(doc, parts)
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise _bad_patch(f"doc is missing path: /{'/'.join(parts)}")


def _remove(doc: Any, parts: list[str]) -> Any:
    parent, last = _parent(doc, parts)
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise _bad_patch(f"unable to remove nonexistent key: /{'/'.join(parts)}")


def _add(doc: Any, parts: list[str], value: Any, replace: bool) -> Any:
    if not parts:
        return value
    parent, last = _parent(doc, parts)
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise _bad_patch(
                f"replace operation does not apply: doc is missing key: /{'/'.join(parts)}"
            )
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            raise _bad_patch(f"index out of range: /{'/'.join(parts)}")
    else:
        raise _bad_patch(f"doc is missing path: /{'/'.join(parts)}")
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902. A failed `test` is 422, as on a real apiserver."""
    if not isinstance(ops, list):
        raise StoreError(400, "BadRequest", "json patch must be a list of operations")
    doc = clone_value(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise StoreError(400, "BadRequest", f"invalid json patch operation: {op!r}")
        kind, parts = op["op"], _pointer(op["path"])
        if kind in ("add", "replace"):
            doc = _add(doc, parts, clone_value(op.get("value")), replace=kind == "replace")
        elif kind == "remove":
            _remove(doc, parts)
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = _remove(doc, source) if kind == "move" else clone_value(_get(doc, source))
            doc = _add(doc, parts, value, replace=False)
        elif kind == "test":
            if _get(doc, parts) != op.get("value"):
                raise _bad_patch(f"testing value /{'/'.join(parts)} failed")
        else:
            raise StoreError(400, "BadRequest", f"unexpected json patch operation {kind!r}")
    return doc


def strategic_merge(target: Any, patch: Any, field: str = "") -> Any:
    """Strategic merge patch for built-in kinds: like a merge patch, but the lists in
    `MERGE_KEYS` merge element-wise by key and `SET_LISTS` as sets; `$patch: replace|delete`
    and `$retainKeys` are honoured, `$setElementOrder/…` directives are accepted and ignored."""
    if isinstance(patch, list):
        return _strategic_list(target, patch, field)
    if not isinstance(patch, dict):
        return clone_value(patch)
    if patch.get("$patch") == "replace":
        return {k: clone_value(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = strategic_merge(result.get(key), value, key)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _strategic_list(target: Any, patch: list[Any], field: str) -> Any:
    current = list(target) if isinstance(target, list) else []
    if field in SET_LISTS:
        return current + [clone_value(v) for v in patch if v not in current]
    key = MERGE_KEYS.get(field)
    if field == "ports" and not any(isinstance(p, dict) and "containerPort" in p for p in patch):
        key = "port"  # a Service's ports merge by port, a container's by containerPort
    if key is None or not all(isinstance(p, dict) for p in patch):
        return [clone_value(v) for v in patch if not (isinstance(v, dict) and "$patch" in v)]
    for item in patch:
        if item.get("$patch") == "replace":
            return [clone_value({k: v for k, v in p.items() if k != "$patch"}) for p in patch]
    for item in patch:
        index = next(
            (
                i
                for i, c in enumerate(current)
                if isinstance(c, dict) and c.get(key) == item.get(key)
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                current.pop(index)
        elif index is None:
            current.append(strategic_merge({}, item, ""))
        else:
            current[index] = strategic_merge(current[index], item, "")
    return current
