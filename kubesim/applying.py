"""PATCH for the store: merge, JSON and strategic-merge patches, and server-side apply (which
may create). Each ends in the store's one update path (`_replace`) or its create path, so
validation, admission, generation and events are the same as for PUT and POST."""

from __future__ import annotations

from typing import Any

from kubesim import fieldowners, patching
from kubesim.model import Obj, ResourceType, StoreError, not_found
from kubesim.tables import Key, Stored, Table, clone


class PatchMixin:
    """The patch half of `Store` (it uses the store's tables and write paths)."""

    tables: dict[tuple[str, str], Table]
    _owners: dict[str, fieldowners.Ownership]

    def _key(self, rt: ResourceType, namespace: str | None, name: str) -> Key:
        raise NotImplementedError

    def _create(
        self, rt: ResourceType, obj: Obj, *, manager: str, ownership: fieldowners.Ownership | None
    ) -> Obj:
        raise NotImplementedError

    def _replace(
        self,
        rt: ResourceType,
        current: Stored,
        new: Obj,
        *,
        manager: str,
        subresource: str | None,
        ownership: fieldowners.Ownership | None = None,
    ) -> Obj:
        raise NotImplementedError

    def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        content_type: str,
        manager: str,
        force: bool = False,
        subresource: str | None = None,
    ) -> Obj:
        """merge-patch, json-patch, strategic-merge (built-ins only) or server-side apply."""
        ctype = content_type.split(";")[0].strip().lower()
        if ctype not in patching.PATCH_TYPES or (ctype == patching.STRATEGIC and rt.is_custom):
            accepted = ", ".join(
                t for t in patching.PATCH_TYPES if not (rt.is_custom and t == patching.STRATEGIC)
            )
            raise StoreError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                + accepted,
            )
        if force and ctype != patching.APPLY:
            raise StoreError(
                422, "Invalid", "force: Forbidden: may not be specified for non-apply patch"
            )
        current = self.tables[rt.key].get(self._key(rt, namespace, name))
        if ctype == patching.APPLY:
            return self._apply(rt, namespace, name, body, current, manager, force, subresource)
        if current is None:
            raise not_found(rt, name)
        base = clone(current.obj)
        if ctype == patching.MERGE:
            new = patching.merge_patch(base, body)
        elif ctype == patching.JSON_PATCH:
            new = patching.json_patch(base, body)
        else:
            new = patching.strategic_merge(base, body)
        if not isinstance(new, dict):
            raise StoreError(400, "BadRequest", "patch did not produce an object")
        return self._replace(rt, current, new, manager=manager, subresource=subresource)

    def _apply(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        current: Stored | None,
        manager: str,
        force: bool,
        subresource: str | None,
    ) -> Obj:
        if not isinstance(body, dict):
            raise StoreError(400, "BadRequest", "apply patch body must be an object")
        meta = body.get("metadata") or {}
        if "managedFields" in meta:
            raise StoreError(400, "BadRequest", "metadata.managedFields must be nil")
        declared = clone(body)
        declared.setdefault("metadata", {})
        declared["metadata"]["name"] = name
        if rt.namespaced:
            declared["metadata"]["namespace"] = namespace
        if subresource == "status":
            declared = {"metadata": declared["metadata"], "status": declared.get("status", {})}
        else:
            declared.pop("status", None)
        if current is None:
            if subresource is not None or meta.get("resourceVersion"):
                raise not_found(rt, name)
            own: fieldowners.Ownership = {}
            obj = fieldowners.apply(
                own, {}, declared, manager, force, rt.api_version, patching.merge_patch
            )
            return self._create(rt, obj, manager=manager, ownership=own)
        own = {k: set(v) for k, v in self._owners.get(current.obj["metadata"]["uid"], {}).items()}
        base = clone(current.obj)
        new = fieldowners.apply(
            own,
            base,
            declared,
            manager,
            force,
            rt.api_version,
            patching.merge_patch,
            status_only=subresource == "status",
        )
        return self._replace(
            rt, current, new, manager=manager, subresource=subresource, ownership=own
        )
