"""The `scale` subresource of Deployments and ReplicaSets (`.../deployments/<name>/scale`), as
the apiserver serves it: an `autoscaling/v1` `Scale` view of the object.

- GET answers `{spec: {replicas}, status: {replicas, selector}}`, where `status.replicas` is the
  object's `status.replicas` and `status.selector` its `spec.selector` as a selector string
  (`app=web,tier in (a,b)`); metadata carries the object's name, namespace, uid,
  resourceVersion and creationTimestamp.
- PUT takes a `Scale` (strict schema, `spec.replicas` not negative; a `metadata.resourceVersion`
  is a precondition) and PATCH a merge, JSON or strategic patch of the `Scale`. Either writes the
  object's `spec.replicas` through the object's own update path (defaults, validation, admission,
  generation, events) and records the field manager as the owner of `.spec.replicas`, then
  answers the new `Scale`. Server-side apply to `/scale` is 415.
"""

from __future__ import annotations

from typing import Any

from kubesim import patching
from kubesim.model import Obj, ResourceType, StoreError, conflict, not_found
from kubesim.selectors import format_label_selector
from kubesim.tables import Key, Stored, Table, clone
from kubesim.validation import validate

SCALE = ResourceType("autoscaling", "v1", "scale", "Scale", namespaced=True, has_status=True)
_ACCEPTED = (patching.JSON_PATCH, patching.MERGE, patching.STRATEGIC)


def scale_of(obj: Obj) -> Obj:
    """The `autoscaling/v1` Scale of a Deployment or ReplicaSet."""
    meta, spec = obj["metadata"], obj.get("spec") or {}
    scale_spec: Obj = {}
    if spec.get("replicas"):  # Go's `omitempty` on an int32
        scale_spec["replicas"] = spec["replicas"]
    status: Obj = {"replicas": int((obj.get("status") or {}).get("replicas") or 0)}
    selector = format_label_selector(spec.get("selector"))
    if selector:
        status["selector"] = selector
    kept = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in kept if k in meta},
        "spec": scale_spec,
        "status": status,
    }


class ScaleMixin:
    """The scale half of `Store` (it uses the store's tables and update path)."""

    tables: dict[tuple[str, str], Table]

    def _key(self, rt: ResourceType, namespace: str | None, name: str) -> Key:
        raise NotImplementedError

    def _replace(
        self,
        rt: ResourceType,
        current: Stored,
        new: Obj,
        *,
        manager: str,
        subresource: str | None,
        ownership: Any = None,
    ) -> Obj:
        raise NotImplementedError

    def _scaled(self, rt: ResourceType, namespace: str | None, name: str) -> Stored:
        if rt.plural not in ("deployments", "replicasets"):
            raise StoreError(404, "NotFound", "the server could not find the requested resource")
        current = self.tables[rt.key].get(self._key(rt, namespace, name))
        if current is None:
            raise not_found(rt, name)
        return current

    def get_scale(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        return scale_of(self._scaled(rt, namespace, name).obj)

    def update_scale(
        self, rt: ResourceType, namespace: str | None, name: str, body: Any, *, manager: str
    ) -> Obj:
        """PUT `.../<name>/scale`: set `spec.replicas` from the Scale `body`."""
        current = self._scaled(rt, namespace, name)
        if not isinstance(body, dict):
            raise StoreError(400, "BadRequest", "the request body must be an object")
        # The status of a Scale is read only: ignored, as on the apiserver.
        scale = {k: v for k, v in body.items() if k != "status"}
        scale.update(apiVersion="autoscaling/v1", kind="Scale")
        scale["metadata"] = {**(scale.get("metadata") or {}), "name": name}
        validate(SCALE, scale)
        expected = scale["metadata"].get("resourceVersion")
        if expected and expected != current.obj["metadata"]["resourceVersion"]:
            raise conflict(rt, name)
        new = clone(current.obj)
        new.setdefault("spec", {})["replicas"] = int((scale.get("spec") or {}).get("replicas") or 0)
        return scale_of(self._replace(rt, current, new, manager=manager, subresource=None))

    def patch_scale(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        content_type: str,
        manager: str,
    ) -> Obj:
        """PATCH `.../<name>/scale`: patch the current Scale, then write it as a PUT would."""
        ctype = content_type.split(";")[0].strip().lower()
        if ctype not in _ACCEPTED:
            raise StoreError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                + ", ".join(_ACCEPTED),
            )
        current = scale_of(self._scaled(rt, namespace, name).obj)
        if ctype == patching.MERGE:
            patched = patching.merge_patch(current, body)
        elif ctype == patching.JSON_PATCH:
            patched = patching.json_patch(current, body)
        else:
            patched = patching.strategic_merge(current, body)
        if not isinstance(patched, dict):
            raise StoreError(400, "BadRequest", "patch did not produce an object")
        return self.update_scale(rt, namespace, name, patched, manager=manager)
