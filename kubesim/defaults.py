"""What the registry strategies do around a write: defaulting and status handling on create,
the Job template immutability rule, and whether a change bumps `generation`.
"""

from __future__ import annotations

from typing import Any

from kubesim.model import Obj, ResourceType, StoreError, invalid
from kubesim.services import default_service, keep_allocated
from kubesim.tables import clone
from kubesim.workloads import apply_defaults, bumps_generation, immutable_fields, reset_status

JOB_MUTABLE_TEMPLATE_FIELDS = ("nodeSelector", "affinity", "tolerations", "schedulingGates")


_SYSTEM_META = (
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "namespace",
    "name",
)


def normalise(rt: ResourceType, obj: Obj) -> Obj:
    """apiVersion and kind first (the stored encoding relies on it)."""
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    out: Obj = {"apiVersion": rt.api_version, "kind": rt.kind, **rest}
    out.setdefault("metadata", {})
    return out


def compose_write(rt: ResourceType, old: Obj, new: Obj, subresource: str | None) -> Obj:
    """The object a write produces: system metadata kept, and either only status
    (`/status`) or everything but status (main resource) taken from `new`."""
    if subresource == "status":
        out = clone(old)
        if "status" in new:
            out["status"] = new["status"]
        else:
            out.pop("status", None)
        if rt.plural == "deployments":
            # The Deployment status strategy keeps only spec and labels: the controller records
            # `deployment.kubernetes.io/revision` through /status.
            _copy_annotations(new, out)
        return out
    out = normalise(rt, new)
    meta = out["metadata"]
    for field in _SYSTEM_META:
        if field in old["metadata"]:
            meta[field] = old["metadata"][field]
        else:
            meta.pop(field, None)
    meta.pop("managedFields", None)
    if rt.has_status:
        if "status" in old:
            out["status"] = clone(old)["status"]
        else:
            out.pop("status", None)
    return out


def _copy_annotations(source: Obj, target: Obj) -> None:
    annotations = (source.get("metadata") or {}).get("annotations")
    if annotations:
        target["metadata"]["annotations"] = annotations
    else:
        target["metadata"].pop("annotations", None)


def prepare_create(rt: ResourceType, obj: Obj) -> None:
    """Defaults and status reset on create, as the built-in strategies and CRDs with a status
    subresource do (Pod → `Pending`, Job/CRD status dropped, Namespace `Active`)."""
    plural = rt.plural
    if plural == "pods":
        obj["status"] = {"phase": "Pending"}
        spec = obj.setdefault("spec", {})
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
    elif plural == "namespaces":
        obj["status"] = {"phase": "Active"}
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
    elif plural == "jobs":
        obj.pop("status", None)
        _default_job(obj)
    elif plural == "nodes":
        obj.setdefault("spec", {})
    elif plural == "services":
        default_service(obj)
    elif rt.group in ("apps", "policy", "autoscaling"):
        reset_status(plural, obj)
        apply_defaults(plural, obj)
    elif rt.has_status and rt.is_custom:
        obj.pop("status", None)


def _default_job(job: Obj) -> None:
    meta, spec = job["metadata"], job.setdefault("spec", {})
    spec.setdefault("suspend", False)
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    # With per-index back-off the global limit is effectively off (the apiserver's MaxInt32).
    per_index = spec.get("backoffLimitPerIndex") is not None
    spec.setdefault("backoffLimit", 2147483647 if per_index else 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    spec.setdefault("manualSelector", False)
    uid, name = meta["uid"], meta["name"]
    generated = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    }
    if not spec.get("selector"):
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    template = spec.setdefault("template", {})
    template_meta = template.setdefault("metadata", {})
    template_meta["labels"] = {**(template_meta.get("labels") or {}), **generated}


def spec_changed(old: Obj, new: Obj) -> bool:
    """Anything outside `metadata` and `status` changed (what bumps `generation`)."""
    keys = (old.keys() | new.keys()) - {"metadata", "status", "apiVersion", "kind"}
    return any(old.get(k) != new.get(k) for k in keys)


def generation_changed(rt: ResourceType, old: Obj, new: Obj, subresource: str | None) -> bool:
    """Whether a write bumps `generation`: a spec change, or a change of a Deployment's
    annotations through the main resource."""
    if spec_changed(old, new):
        return True
    return subresource is None and bumps_generation(rt.plural, old, new)


def prepare_update(rt: ResourceType, old: Obj, new: Obj) -> None:
    """A main-resource update of a serving kind: defaults again (as on every write), and 422
    when an immutable field changes (the apps/v1 selector)."""
    if rt.group not in ("apps", "policy", "autoscaling"):
        return
    apply_defaults(rt.plural, new)
    causes = [_immutable(field) for field in immutable_fields(rt.plural, old, new)]
    if causes:
        raise invalid(rt, old["metadata"]["name"], causes)


def _strip_mutable(template: Any) -> Any:
    if not isinstance(template, dict):
        return template
    out = {k: v for k, v in template.items() if k != "metadata"}
    meta = {k: v for k, v in (template.get("metadata") or {}).items()}
    meta.pop("labels", None)
    meta.pop("annotations", None)
    out["metadata"] = meta
    spec = dict(out.get("spec") or {})
    for field in JOB_MUTABLE_TEMPLATE_FIELDS:
        spec.pop(field, None)
    out["spec"] = spec
    return out


def check_job_update(rt: ResourceType, old: Obj, new: Obj) -> None:
    """Job `selector`, `completionMode`, `podFailurePolicy` and `template` are immutable, except
    that the template's nodeSelector, affinity, tolerations, schedulingGates, labels and
    annotations may change while the Job is suspended and has never started (`startTime` nil)."""
    if rt.plural != "jobs":
        return
    old_spec, new_spec = old.get("spec", {}), new.get("spec", {})
    causes = []
    for field in ("selector", "completionMode", "podFailurePolicy"):
        if old_spec.get(field) != new_spec.get(field):
            causes.append(_immutable(f"spec.{field}"))
    old_t, new_t = old_spec.get("template"), new_spec.get("template")
    if old_t != new_t:
        # The Job controller sets startTime; a Job never started has none. Only the old
        # object's suspend matters: resuming and editing in one write is allowed (Kueue does it).
        may_edit = old_spec.get("suspend") is True and not (old.get("status") or {}).get(
            "startTime"
        )
        if not may_edit or _strip_mutable(old_t) != _strip_mutable(new_t):
            causes.append(_immutable("spec.template"))
    if causes:
        raise invalid(rt, old["metadata"]["name"], causes)


def check_service_update(rt: ResourceType, old: Obj, new: Obj) -> None:
    """A Service keeps its allocated cluster IPs; changing them is refused."""
    if rt.plural != "services":
        return
    causes = keep_allocated(old, new)
    if causes:
        raise invalid(rt, old["metadata"]["name"], causes)


def check_local_queue_update(rt: ResourceType, old: Obj, new: Obj) -> None:
    """A LocalQueue's `spec.clusterQueue` is immutable (Kueue's CEL rule `self == oldSelf`)."""
    if rt.plural != "localqueues":
        return
    before = (old.get("spec") or {}).get("clusterQueue")
    if before != (new.get("spec") or {}).get("clusterQueue"):
        raise invalid(rt, old["metadata"]["name"], [_immutable("spec.clusterQueue")])


def _immutable(field: str) -> dict[str, str]:
    return {
        "reason": "FieldValueInvalid",
        "message": "Invalid value: field is immutable",
        "field": field,
    }


def check_finalizers(rt: ResourceType, old: Obj, new: Obj) -> None:
    """No new finalizers on an object that is being deleted."""
    if not old["metadata"].get("deletionTimestamp"):
        return
    added = set(new["metadata"].get("finalizers") or ()) - set(
        old["metadata"].get("finalizers") or ()
    )
    if added:
        raise StoreError(
            422,
            "Invalid",
            f'{rt.qualified_kind} "{old["metadata"]["name"]}" is invalid: metadata.finalizers: '
            "Forbidden: no new finalizers can be added if the object is being deleted, found "
            f"new finalizers {sorted(added)!r}",
            [
                {
                    "reason": "FieldValueForbidden",
                    "message": "no new finalizers can be added if the object is being deleted",
                    "field": "metadata.finalizers",
                }
            ],
        ).about(rt, old["metadata"]["name"])


def _true(status: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or ()
    )


def check_job_status(rt: ResourceType, old: Obj, new: Obj) -> None:
    """The Job /status rules the apiserver enforces (JobManagedBy-era validation): terminal
    conditions take two steps and never go away; `startTime` goes only while suspended;
    `succeeded`/`failed` never decrease."""
    if rt.plural != "jobs":
        return
    before, after = old.get("status") or {}, new.get("status") or {}
    causes = []
    for kind in ("Complete", "Failed"):
        if _true(before, kind) and not _true(after, kind):
            causes.append(_status_cause("status.conditions", f"cannot unset the {kind} condition"))
    if _true(after, "Complete") and not _true(before, "Complete"):
        if not _true(after, "SuccessCriteriaMet"):
            causes.append(
                _status_cause(
                    "status.conditions", "cannot set Complete=True without SuccessCriteriaMet=True"
                )
            )
        if not after.get("completionTime"):
            causes.append(
                _status_cause(
                    "status.completionTime", "completionTime is required for a complete Job"
                )
            )
    if _true(after, "Failed") and not _true(before, "Failed") and not _true(after, "FailureTarget"):
        causes.append(
            _status_cause("status.conditions", "cannot set Failed=True without FailureTarget=True")
        )
    if before.get("startTime") and not after.get("startTime") and not new["spec"].get("suspend"):
        causes.append(
            _status_cause("status.startTime", "startTime can be removed only while suspended")
        )
    for counter in ("succeeded", "failed"):
        if (after.get(counter) or 0) < (before.get(counter) or 0):
            causes.append(_status_cause(f"status.{counter}", "cannot decrease"))
    if causes:
        raise invalid(rt, old["metadata"]["name"], causes)


def _status_cause(field: str, message: str) -> dict[str, str]:
    return {"reason": "FieldValueInvalid", "message": f"Invalid value: {message}", "field": field}
