"""declared_drift: what someone changed by hand on an object aicp manages (docs/DESIGN.md §8)."""

from __future__ import annotations

import copy
from typing import Any

from app.domain.render import (
    JobIdentity,
    PoolIdentity,
    render_cluster_queue,
    render_job,
    render_job_metadata_only,
)
from app.domain.render.drift import declared_drift
from app.domain.specs import BindingPut, Quota, WorkloadSpec

SPEC = WorkloadSpec(name="train", compute_pool="h100-pool", image="busybox", accelerators=8)
IDENTITY = JobIdentity(project="research", workload="train", uid="3f2a1c-0000", generation=1)
POOL_UID = "5f0c6a52-3f0e-4c1b-9d7e-2b1f7c3a9e10"
POOL = PoolIdentity(
    project="research", pool="h100-pool", accelerator_class="h100-80g", uid=POOL_UID
)
H100 = BindingPut(resource_name="nvidia.com/gpu", flavor="h100-80g")


def _live_job() -> dict[str, Any]:
    """The Job as the apiserver returns it after Kueue admitted it and pods started."""
    job = render_job(IDENTITY, SPEC, "nvidia.com/gpu")
    job["metadata"].update(uid="u-1", resourceVersion="42", generation=2)
    job["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking", "aicp.dev/evidence"]
    job["metadata"]["labels"]["kueue.x-k8s.io/podset"] = "main"
    job["spec"]["suspend"] = False
    job["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "H100"}
    job["status"] = {"active": 1, "startTime": "2026-08-01T10:00:05Z"}
    return job


def test_an_admitted_running_job_has_no_drift_in_what_aicp_owns() -> None:
    assert declared_drift(render_job_metadata_only(IDENTITY, SPEC), _live_job()) == []


def test_a_label_removed_by_hand_is_reported_by_its_key() -> None:
    live = _live_job()
    del live["metadata"]["labels"]["aicp.dev/uid"]

    drift = declared_drift(render_job_metadata_only(IDENTITY, SPEC), live)

    assert drift == ["metadata.labels[aicp.dev/uid] is missing"]


def test_a_removed_evidence_finalizer_is_reported() -> None:
    live = _live_job()
    live["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]

    drift = declared_drift(render_job_metadata_only(IDENTITY, SPEC), live)

    assert drift == ["metadata.finalizers lacks aicp.dev/evidence"]


def test_a_deleted_job_is_reported_as_missing() -> None:
    drift = declared_drift(render_job_metadata_only(IDENTITY, SPEC), None)

    assert drift == ["Job train-3f2a1c-g1 is missing"]


def test_an_edited_quota_is_reported_with_both_values() -> None:
    desired = render_cluster_queue(POOL, Quota(accelerators=16, cpu="256", memory="2Ti"), H100)
    live = copy.deepcopy(desired)
    live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = 8

    drift = declared_drift(desired, live)

    assert drift == [
        "spec.resourceGroups[0].flavors[0].resources[2].nominalQuota is 8, aicp declares 16"
    ]


def test_quantities_equal_by_value_are_not_drift() -> None:
    desired = render_cluster_queue(POOL, Quota(accelerators=16, cpu="256", memory="2Ti"), H100)
    live = copy.deepcopy(desired)
    resources = live["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    resources[0]["nominalQuota"] = 256
    resources[1]["nominalQuota"] = "2048Gi"
    resources[2]["nominalQuota"] = "16"
    live["status"] = {"admittedWorkloads": 1}

    assert declared_drift(desired, live) == []


def test_a_changed_namespace_selector_is_drift() -> None:
    desired = render_cluster_queue(POOL, Quota(accelerators=16, cpu="256", memory="2Ti"), H100)
    live = copy.deepcopy(desired)
    live["spec"]["namespaceSelector"] = {}

    drift = declared_drift(desired, live)

    assert drift == ["spec.namespaceSelector.matchLabels is missing"]
