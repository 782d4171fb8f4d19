"""A compute pool's state, reason and usage, read from its Kueue ClusterQueue.

`classify_pool` gives the pool's `status` (docs/API.md: `state`, `reason`, `usage` as
`app.domain.pool_resources.PoolUsage`);
`pool_snapshot` gives workload classification the numbers a "waiting for quota" reason needs.
Both are pure functions of the ClusterQueue dict (v1beta2: `status.flavorsUsage`,
`status.admittedWorkloads`, `status.pendingWorkloads`, condition `Active`).
`no_node_for_flavor` reads the nodes: a flavor whose node labels no node carries leaves the
pool DEGRADED even while Kueue calls its queue active (Kueue admits on quota alone, and the
pods of what it admits would never schedule).
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, NamedTuple

from app.domain.classify.evidence import PoolSnapshot
from app.domain.conditions import KueueCondition
from app.domain.kube_objects import KubeObject, condition, field, name_of
from app.domain.pool_resources import PoolUsage
from app.domain.quantity import QuantityError, parse_quantity
from app.domain.states import ResourceState

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

_BASE_RESOURCES = ("cpu", "memory")


class PoolClassification(NamedTuple):
    state: ResourceState
    reason: str
    usage: PoolUsage


def _amount(value: object) -> Decimal:
    if isinstance(value, int):
        return Decimal(value)
    try:
        return parse_quantity(str(value)) if value is not None else Decimal(0)
    except QuantityError:
        return Decimal(0)


def _plain(amount: Decimal) -> str:
    """A quantity as a plain decimal number (`4`, `0.5`, `17179869184`), no exponent."""
    text = format(amount.normalize(), "f")
    return text if amount else "0"


def _count(cluster_queue: KubeObject, key: str) -> int:
    value = field(cluster_queue, "status", key)
    return value if isinstance(value, int) else 0


def _sum_by_resource(entries: object, amount_key: str) -> dict[str, Decimal]:
    """Add up `<amount_key>` per resource name over every flavor of a list of flavor entries."""
    totals: dict[str, Decimal] = {}
    for flavor in entries if isinstance(entries, list) else ():
        for resource in field(flavor, "resources") or ():
            name = field(resource, "name")
            if name:
                totals[name] = totals.get(name, Decimal(0)) + _amount(resource.get(amount_key))
    return totals


def accelerator_resource_of(cluster_queue: KubeObject) -> str | None:
    """The covered resource that is neither cpu nor memory (aicp queues cover exactly one)."""
    for group in field(cluster_queue, "spec", "resourceGroups") or ():
        for resource in field(group, "coveredResources") or ():
            if resource not in _BASE_RESOURCES:
                return str(resource)
    return None


def pool_snapshot(cluster_queue: KubeObject, pool_name: str) -> PoolSnapshot:
    """Nominal quota (from spec) and usage (from status) per resource of a pool's queue."""
    quota: dict[str, Decimal] = {}
    for group in field(cluster_queue, "spec", "resourceGroups") or ():
        for name, amount in _sum_by_resource(field(group, "flavors"), "nominalQuota").items():
            quota[name] = quota.get(name, Decimal(0)) + amount
    return PoolSnapshot(
        name=pool_name,
        quota=quota,
        in_use=_sum_by_resource(field(cluster_queue, "status", "flavorsUsage"), "total"),
        workloads_admitted=_count(cluster_queue, "admittedWorkloads"),
        workloads_pending=_count(cluster_queue, "pendingWorkloads"),
    )


def _workloads(count: int) -> str:
    return f"{count} workload" if count == 1 else f"{count} workloads"


def no_node_for_flavor(
    flavor: str, node_labels: Mapping[str, str], nodes: Iterable[KubeObject]
) -> str | None:
    """The DEGRADED reason of a pool whose flavor's node labels no node carries all of; None
    when a node does (or the flavor selects no labels, so any node will do)."""
    if not node_labels:
        return None
    wanted = sorted(node_labels.items())
    for node in nodes:  # every node, on each look while none matches: kept plain and fast
        labels = (node.get("metadata") or {}).get("labels") or {}
        for key, value in wanted:
            if labels.get(key) != value:
                break
        else:
            return None
    shown = ", ".join(f"{key}={value}" for key, value in wanted)
    label = "label" if len(node_labels) == 1 else "labels"
    return (
        f"No node has the node {label} of flavor {flavor} ({shown}), so the pods of workloads "
        "admitted to this pool cannot be scheduled; label the nodes that have these "
        "accelerators, or correct the accelerator binding's node_labels."
    )


def classify_pool(
    cluster_queue: KubeObject | None,
    *,
    resource_name: str | None = None,
    no_node: str | None = None,
) -> PoolClassification:
    """READY while Kueue reports the ClusterQueue `Active`, DEGRADED when it says it is not,
    or when `no_node` (`no_node_for_flavor`'s reason) says no node can run its pods.

    PENDING while the queue does not exist or Kueue has not reported on it yet. The
    accelerator resource defaults to the queue's one non-cpu, non-memory covered resource.
    """
    if cluster_queue is None:
        return PoolClassification(
            ResourceState.PENDING, "The pool's queue has not been created yet.", PoolUsage()
        )
    resource = resource_name or accelerator_resource_of(cluster_queue) or "accelerators"
    snapshot = pool_snapshot(cluster_queue, name_of(cluster_queue))
    usage = PoolUsage(
        accelerators_admitted=int(snapshot.in_use.get(resource, Decimal(0))),
        workloads_admitted=snapshot.workloads_admitted,
        workloads_pending=snapshot.workloads_pending,
        cpu_admitted=_plain(snapshot.in_use.get("cpu", Decimal(0))),
        memory_admitted=_plain(snapshot.in_use.get("memory", Decimal(0)).to_integral_value()),
    )
    active = condition(cluster_queue, KueueCondition.ACTIVE)
    if active is None:
        reason = f"Waiting for Kueue to activate cluster queue {name_of(cluster_queue)}."
        return PoolClassification(ResourceState.PENDING, reason, usage)
    if active.get("status") != "True":
        message = str(active.get("message") or active.get("reason") or "no reason given")
        reason = f"The pool cannot admit workloads: {message.rstrip('.')}."
        return PoolClassification(ResourceState.DEGRADED, reason, usage)
    if no_node is not None:
        return PoolClassification(ResourceState.DEGRADED, no_node, usage)
    quota = int(snapshot.quota.get(resource, Decimal(0)))
    reason = (
        f"Ready: {usage.accelerators_admitted} of {quota} {resource} in use by "
        f"{_workloads(usage.workloads_admitted)}, {_workloads(usage.workloads_pending)} waiting."
    )
    return PoolClassification(ResourceState.READY, reason, usage)
