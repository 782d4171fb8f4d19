"""classify_pool and pool_snapshot: a pool's state, reason and usage from its ClusterQueue."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from app.domain.classify.pool import classify_pool, no_node_for_flavor, pool_snapshot
from app.domain.pool_resources import PoolUsage
from app.domain.render import PoolIdentity, render_cluster_queue
from app.domain.specs import BindingPut, Quota
from app.domain.states import ResourceState

H100 = BindingPut(resource_name="nvidia.com/gpu", flavor="h100-80g")
POOL_UID = "5f0c6a52-3f0e-4c1b-9d7e-2b1f7c3a9e10"
POOL = PoolIdentity(
    project="research", pool="h100-pool", accelerator_class="h100-80g", uid=POOL_UID
)


def _cluster_queue(
    *,
    active: str | None = "True",
    gpus: str | int = 8,
    admitted: int = 1,
    pending: int = 2,
    message: str = "Can admit new workloads",
) -> dict[str, Any]:
    """The rendered ClusterQueue, with status as Kueue v1beta2 reports it."""
    queue = render_cluster_queue(POOL, Quota(accelerators=16, cpu="256", memory="2Ti"), H100)
    queue["metadata"]["uid"] = "cq-uid"
    status: dict[str, Any] = {
        "flavorsUsage": [
            {
                "name": "h100-80g",
                "resources": [
                    {"name": "cpu", "total": "32", "borrowed": "0"},
                    {"name": "memory", "total": "256Gi", "borrowed": "0"},
                    {"name": "nvidia.com/gpu", "total": gpus, "borrowed": "0"},
                ],
            }
        ],
        "admittedWorkloads": admitted,
        "reservingWorkloads": admitted,
        "pendingWorkloads": pending,
    }
    if active is not None:
        reason = "Ready" if active == "True" else "FlavorNotFound"
        status["conditions"] = [
            {
                "type": "Active",
                "status": active,
                "reason": reason,
                "message": message,
                "lastTransitionTime": "2026-08-01T10:00:00Z",
            }
        ]
    queue["status"] = status
    return queue


@pytest.mark.parametrize(
    ("queue", "state", "reason"),
    [
        pytest.param(
            None,
            ResourceState.PENDING,
            "The pool's queue has not been created yet.",
            id="no-cluster-queue-is-pending",
        ),
        pytest.param(
            _cluster_queue(active=None),
            ResourceState.PENDING,
            "Waiting for Kueue to activate cluster queue aicp-research-h100-pool.",
            id="no-active-condition-yet-is-pending",
        ),
        pytest.param(
            _cluster_queue(),
            ResourceState.READY,
            "Ready: 8 of 16 nvidia.com/gpu in use by 1 workload, 2 workloads waiting.",
            id="active-queue-is-ready-with-usage",
        ),
        pytest.param(
            _cluster_queue(
                active="False",
                message="Can't admit new workloads: references missing ResourceFlavor(s): "
                "h100-80g.",
            ),
            ResourceState.DEGRADED,
            "The pool cannot admit workloads: Can't admit new workloads: references missing "
            "ResourceFlavor(s): h100-80g.",
            id="inactive-queue-is-degraded-with-kueues-reason",
        ),
    ],
)
def test_classify_pool_reports_state_and_reason(
    queue: dict[str, Any] | None, state: ResourceState, reason: str
) -> None:
    result = classify_pool(queue)

    assert (result.state, result.reason) == (state, reason)


def test_usage_counts_admitted_accelerators_and_workloads() -> None:
    _, _, usage = classify_pool(_cluster_queue(gpus="12", admitted=3, pending=0))

    assert usage == PoolUsage(
        accelerators_admitted=12,
        workloads_admitted=3,
        workloads_pending=0,
        cpu_admitted="32",
        memory_admitted=str(256 * 2**30),
    )


def test_fractional_cpu_in_use_is_a_plain_number() -> None:
    queue = _cluster_queue()
    queue["status"]["flavorsUsage"][0]["resources"][0]["total"] = "1500m"

    assert classify_pool(queue).usage.cpu_admitted == "1.5"


def test_a_queue_without_status_has_zero_usage() -> None:
    queue = _cluster_queue()
    del queue["status"]

    assert classify_pool(queue).usage == PoolUsage()


def test_the_snapshot_has_nominal_quota_and_usage_per_resource() -> None:
    snapshot = pool_snapshot(_cluster_queue(gpus=8), "h100-pool")

    assert snapshot.quota == {
        "cpu": Decimal(256),
        "memory": Decimal(2 * 2**40),
        "nvidia.com/gpu": Decimal(16),
    }
    assert snapshot.in_use == {
        "cpu": Decimal(32),
        "memory": Decimal(256 * 2**30),
        "nvidia.com/gpu": Decimal(8),
    }
    assert (snapshot.workloads_admitted, snapshot.workloads_pending) == (1, 2)


# --- a flavor whose node labels no node carries ---------------------------------------------

H100_LABELS = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}


def _node(name: str, **labels: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": labels}}


def test_a_flavor_no_node_carries_all_the_labels_of_degrades_the_pool_and_names_them() -> None:
    nodes = [
        _node("gpu-node-0", **{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
        _node("gpu-node-1", **{"nvidia.com/gpu.count": "8"}),
    ]

    no_node = no_node_for_flavor("h100-80g", H100_LABELS, nodes)
    state, reason, _ = classify_pool(_cluster_queue(), no_node=no_node)

    assert state == ResourceState.DEGRADED
    assert reason == (
        "No node has the node labels of flavor h100-80g (nvidia.com/gpu.count=8, "
        "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3), so the pods of workloads admitted to "
        "this pool cannot be scheduled; label the nodes that have these accelerators, or "
        "correct the accelerator binding's node_labels."
    )


@pytest.mark.parametrize(
    ("labels", "nodes"),
    [
        pytest.param(H100_LABELS, [_node("gpu-node-0", **H100_LABELS, extra="x")], id="a-match"),
        pytest.param({}, [], id="no-labels-any-node-will-do"),
    ],
)
def test_a_flavor_a_node_matches_leaves_the_pool_ready(
    labels: dict[str, str], nodes: list[dict[str, Any]]
) -> None:
    no_node = no_node_for_flavor("h100-80g", labels, nodes)

    assert no_node is None
    assert classify_pool(_cluster_queue(), no_node=no_node).state == ResourceState.READY


def test_kueue_calling_the_queue_inactive_is_reported_before_the_nodes() -> None:
    no_node = no_node_for_flavor("h100-80g", H100_LABELS, [])

    state, reason, _ = classify_pool(
        _cluster_queue(active="False", message="Can't admit new workloads: FlavorNotFound"),
        no_node=no_node,
    )

    assert state == ResourceState.DEGRADED
    assert "FlavorNotFound" in reason
