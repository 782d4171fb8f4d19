"""Field ownership, like the apiserver's managedFields, at leaf granularity (lists are atomic).

Each object has an `Ownership`: for every field manager identity `(manager, operation)` the set
of leaf paths it owns. Updates (PUT, merge/JSON/strategic patch) take the leaves they change;
server-side apply declares a set of leaves, conflicts with other owners holding a different
value (unless forced, which transfers them), and removes the leaves this applier declared before
and no longer declares when nobody else owns them.
"""

from __future__ import annotations

from typing import Any

from kubesim.model import Obj, StoreError

Path = tuple[str, ...]
Identity = tuple[str, str]  # (manager, "Apply" | "Update")
Ownership = dict[Identity, set[Path]]

# System-maintained metadata nobody "owns".
_UNOWNED_META = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    }
)
_MISSING = object()


def leaves(obj: Any, prefix: Path = ()) -> dict[Path, Any]:
    """Leaf path → value. Dicts recurse; lists, scalars and empty dicts are leaves."""
    out: dict[Path, Any] = {}
    if isinstance(obj, dict) and obj:
        for key, value in obj.items():
            if not prefix and key in ("apiVersion", "kind"):
                continue
            if prefix == ("metadata",) and key in _UNOWNED_META:
                continue
            out.update(leaves(value, (*prefix, key)))
    elif prefix:
        out[prefix] = obj
    return out


def get_path(obj: Any, path: Path) -> Any:
    cur = obj
    for part in path:
        if not isinstance(cur, dict) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


def _remove_path(obj: Obj, path: Path) -> None:
    """Remove a leaf and prune the dicts it leaves empty."""
    chain: list[dict[str, Any]] = []
    cur: Any = obj
    for part in path[:-1]:
        if not isinstance(cur, dict) or not isinstance(cur.get(part), dict):
            return
        chain.append(cur)
        cur = cur[part]
    if isinstance(cur, dict):
        cur.pop(path[-1], None)
    for parent, part in zip(reversed(chain), reversed(path[:-1]), strict=True):
        if parent[part] == {} and len(path) > 1:
            del parent[part]
        else:
            break


def _overlaps(a: Path, b: Path) -> bool:
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


def dotted(path: Path) -> str:
    return "." + ".".join(path)


def record_update(own: Ownership, old: Obj | None, new: Obj, manager: str) -> None:
    """An update by `manager`: it takes every leaf whose value it changed or added; leaves it
    removed are dropped from every owner."""
    before = leaves(old) if old is not None else {}
    after = leaves(new)
    changed = {p for p, v in after.items() if before.get(p, _MISSING) != v}
    removed = before.keys() - after.keys()
    if not changed and not removed:
        return
    for ident, paths in list(own.items()):
        paths.difference_update(removed)
        if ident[0] != manager or ident[1] != "Update":
            stale = {q for q in paths for p in changed if _overlaps(p, q)}
            paths.difference_update(stale)
        if not paths:
            del own[ident]
    if changed:
        own.setdefault((manager, "Update"), set()).update(changed)


def _conflicts(
    own: Ownership, current: Obj, body: Obj, declared: dict[Path, Any], me: Identity
) -> list[tuple[Identity, Path]]:
    found: list[tuple[Identity, Path]] = []
    for ident, paths in own.items():
        if ident == me:
            continue
        for q in paths:
            for p in declared:
                if not _overlaps(p, q):
                    continue
                longer = p if len(p) >= len(q) else q
                if get_path(current, longer) != get_path(body, longer):
                    found.append((ident, q))
                    break
    return found


def conflict_error(conflicts: list[tuple[Identity, Path]], api_version: str) -> StoreError:
    """409 Conflict with `FieldManagerConflict` causes, worded like the apiserver's."""
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f'conflict with "{ident[0]}" using {api_version}',
            "field": dotted(path),
        }
        for ident, path in conflicts
    ]
    if len(conflicts) == 1:
        ident, path = conflicts[0]
        message = (
            f'Apply failed with 1 conflict: conflict with "{ident[0]}" using {api_version}: '
            + dotted(path)
        )
    else:
        lines = "".join(f"\n- {dotted(p)}" for _, p in conflicts)
        managers = sorted({i[0] for i, _ in conflicts})
        message = (
            f"Apply failed with {len(conflicts)} conflicts: conflicts with "
            + ", ".join(f'"{m}"' for m in managers)
            + ":"
            + lines
        )
    return StoreError(409, "Conflict", message, causes)


def apply(
    own: Ownership,
    current: Obj,
    body: Obj,
    manager: str,
    force: bool,
    api_version: str,
    merge: Any,
    status_only: bool = False,
) -> Obj:
    """Server-side apply of `body` onto `current` (both full objects; `current` may be `{}` on
    create). Mutates `own`; returns the merged object. `merge(current, body)` is the merge to use
    (JSON merge semantics without null deletion). `status_only`: an apply to `/status`, which
    only declares (and only drops) status leaves; a main-resource apply never touches them."""
    me: Identity = (manager, "Apply")
    declared = leaves(body)
    conflicts = _conflicts(own, current, body, declared, me)
    if conflicts and not force:
        raise conflict_error(conflicts, api_version)
    for ident, path in conflicts:
        own[ident].discard(path)
        if not own[ident]:
            del own[ident]
    result: Obj = merge(current, body)
    mine = own.get(me, set())
    in_scope = {p for p in mine if (p[0] == "status") == status_only}
    dropped = in_scope - declared.keys()
    for path in dropped:
        shared = any(
            _overlaps(path, q) for ident, paths in own.items() if ident != me for q in paths
        )
        if not shared and not any(_overlaps(path, p) for p in declared):
            _remove_path(result, path)
    own[me] = (mine - in_scope) | set(declared)
    # Leaves the merge took from nobody in particular stay unowned; other owners' leaves whose
    # value the apply set equal stay shared, as in the real field manager.
    return result
