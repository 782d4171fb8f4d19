"""The batch/v1 Job of one workload generation, and the metadata-only body for re-applies.

Ownership (docs/DESIGN.md §6): aicp creates the Job suspended and Kueue owns `spec.suspend` and the
pod template's `nodeSelector`/`tolerations` from admission on. So there are two bodies:

- `render_job` — the whole Job, applied only when the Job does not exist yet;
- `render_job_metadata_only` — what aicp keeps asserting afterwards (labels, finalizer). It
  declares no `spec` at all: re-applying `suspend: true` with `force` would take the field back
  from Kueue and re-suspend a running Job. It is applied under its own field manager
  (`JOB_METADATA_FIELD_MANAGER`), because under the creating manager the apply would prune
  every spec field that manager declared at creation.

Both are deterministic (maps are emitted with sorted keys), so applying one twice is a no-op
on the server and produces no watch event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.domain.labels import (
    EVIDENCE_FINALIZER,
    GENERATION_LABEL,
    MAIN_CONTAINER,
    PRIORITY_CLASS_LABEL,
    PROJECT_LABEL,
    QUEUE_NAME_LABEL,
    UID_LABEL,
    WORKLOAD_LABEL,
    managed_labels,
)
from app.domain.render.queues import priority_class_name
from app.domain.render.rendezvous import rendezvous_env, service_name

if TYPE_CHECKING:
    from app.domain.kube_objects import Manifest
    from app.domain.render.inputs import JobIdentity
    from app.domain.specs import WorkloadSpec


def identity_labels(identity: JobIdentity) -> dict[str, str]:
    """The labels that tie a Kubernetes object to one workload generation."""
    return {
        PROJECT_LABEL: identity.project,
        WORKLOAD_LABEL: identity.workload,
        UID_LABEL: identity.uid,
        GENERATION_LABEL: str(identity.generation),
    }


def render_job_labels(identity: JobIdentity, spec: WorkloadSpec) -> dict[str, str]:
    """Every label aicp declares on the Job: the user's labels, then aicp's (which win).

    Includes Kueue's queue-name (the pool's LocalQueue) and priority-class labels.
    """
    return managed_labels(
        {
            **spec.labels,
            **identity_labels(identity),
            QUEUE_NAME_LABEL: spec.compute_pool,
            PRIORITY_CLASS_LABEL: priority_class_name(spec.priority),
        }
    )


def _pod_labels(identity: JobIdentity, spec: WorkloadSpec) -> dict[str, str]:
    # Pods carry the identity labels too, so the pod informer can index them by uid.
    return managed_labels({**spec.labels, **identity_labels(identity)})


def _env(identity: JobIdentity, spec: WorkloadSpec) -> list[dict[str, Any]]:
    # The API forbids user keys starting with AICP_ (and, for a multi-node workload, the
    # rendezvous names), so these never clash with the user's. Sorted by name: the stored
    # spec is jsonb, which does not keep key order anyway.
    env: dict[str, dict[str, Any]] = {
        **{name: {"value": value} for name, value in spec.env.items()},
        "AICP_PROJECT": {"value": identity.project},
        "AICP_WORKLOAD": {"value": identity.workload},
        "AICP_GENERATION": {"value": str(identity.generation)},
    }
    if spec.distributed:
        env.update(rendezvous_env(identity, spec))
    return [{"name": name, **entry} for name, entry in sorted(env.items())]


def _resources(spec: WorkloadSpec, accelerator_resource: str) -> dict[str, dict[str, str]]:
    amounts = {"cpu": spec.cpu, "memory": spec.memory}
    if spec.accelerators > 0:
        amounts[accelerator_resource] = str(spec.accelerators)
    # Requests equal limits: accelerators cannot be overcommitted, and a memory limit equal to
    # the request is what makes an OOMKilled reason name the number the user chose.
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _container(
    identity: JobIdentity, spec: WorkloadSpec, accelerator_resource: str
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": MAIN_CONTAINER, "image": spec.image}
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    container["env"] = _env(identity, spec)
    container["resources"] = _resources(spec, accelerator_resource)
    return container


def render_job(identity: JobIdentity, spec: WorkloadSpec, accelerator_resource: str) -> Manifest:
    """The full Job for creating generation `identity.generation` of a workload.

    `accelerator_resource` is the binding's resource name (`nvidia.com/gpu`); it is requested
    only when the workload asks for accelerators. The Job is created suspended with the
    evidence finalizer; Kueue unsuspends it on admission and injects the flavor's node labels
    and tolerations, which is why this manifest sets neither.

    A multi-node workload (`spec.distributed`) is an Indexed Job instead: `nodes` completions
    run at once, its pods name the headless Service as `subdomain`, and a pod failure policy
    fails the whole Job the moment any rank exits non-zero (`backoffLimit` 0: no single rank
    is ever restarted on its own, which the others' rendezvous could not survive); the
    workload step starts the next attempt as a new Job while retries remain.
    """
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [_container(identity, spec, accelerator_resource)],
    }
    job_spec: dict[str, Any] = {
        "suspend": True,
        "parallelism": spec.pods,
        "completions": spec.pods,
        "backoffLimit": spec.retries,
        "activeDeadlineSeconds": spec.max_runtime_seconds,
        "template": {
            "metadata": {"labels": _pod_labels(identity, spec)},
            "spec": pod_spec,
        },
    }
    if spec.distributed:
        pod_spec["subdomain"] = service_name(identity)
        job_spec["backoffLimit"] = 0
        job_spec["completionMode"] = "Indexed"
        job_spec["podFailurePolicy"] = {
            "rules": [
                {
                    "action": "FailJob",
                    "onExitCodes": {
                        "containerName": MAIN_CONTAINER,
                        "operator": "NotIn",
                        "values": [0],
                    },
                }
            ]
        }
    return {**_job_head(identity, spec), "spec": job_spec}


def _job_head(identity: JobIdentity, spec: WorkloadSpec) -> Manifest:
    """apiVersion, kind and the metadata aicp owns: the labels and the evidence finalizer."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": identity.job_name,
            "namespace": identity.namespace,
            "labels": render_job_labels(identity, spec),
            "finalizers": [EVIDENCE_FINALIZER],
        },
    }


def render_job_metadata_only(identity: JobIdentity, spec: WorkloadSpec) -> Manifest:
    """The apply body for an existing Job: only the labels and finalizer aicp owns.

    Used to restore drifted metadata (a label removed by hand) without touching `spec`,
    which Kueue owns once the Job is admitted. Apply it as field manager
    `JOB_METADATA_FIELD_MANAGER`, never as the manager that created the Job (see there).
    """
    return _job_head(identity, spec)
