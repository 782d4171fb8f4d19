"""Whether one pod of a workload fits on some node of its accelerator class.

A pool's quota may be large enough for `nodes x accelerators` while no single node can hold
one pod: 16 GPUs per pod on nodes of 8 never schedules. The Node informer's cache
(`app.kube.informers`) gives every node's labels and allocatable resources as
`NodeCapacity`; `check_fits_node` compares one pod's request (every rank or replica asks
the same) with the nodes whose labels carry all of the class's `node_labels`.

It only refuses what is certain: with no node of the class at all (a cluster autoscaler
may still add some) or before the cache's first list (`NodeSource` answers None), the
workload is accepted and waits as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING

import msgspec

from app.domain.quantity import QuantityError, format_bytes, format_cpu, parse_quantity

if TYPE_CHECKING:
    from app.domain.kube_objects import Manifest
    from app.domain.specs import PodRequest


class NodeCapacity(msgspec.Struct, frozen=True, kw_only=True):
    """One node as the fit check needs it: its name, labels and allocatable resources (by
    resource name, as exact numbers; an unparsable quantity counts as 0)."""

    name: str
    labels: dict[str, str]
    allocatable: dict[str, Decimal]


#: The nodes the informer has seen, or None while its first list has not completed.
NodeSource = Callable[[], "list[NodeCapacity] | None"]


def node_capacity_of(node: Manifest) -> NodeCapacity:
    """A Node's name, labels and `status.allocatable` (the wire form)."""
    metadata = node.get("metadata") or {}
    status = node.get("status") or {}
    allocatable: dict[str, Decimal] = {}
    for resource, value in (status.get("allocatable") or {}).items():
        try:
            allocatable[str(resource)] = parse_quantity(str(value))
        except QuantityError:
            allocatable[str(resource)] = Decimal(0)
    return NodeCapacity(
        name=str(metadata.get("name", "")),
        labels={str(k): str(v) for k, v in (metadata.get("labels") or {}).items()},
        allocatable=allocatable,
    )


class NodeShortfall(msgspec.Struct, frozen=True, kw_only=True):
    """One pod that no node of its class can hold.

    `requested` is one pod's request and `node_capacity` the most any node of the class has,
    each by `accelerators`, `cpu`, `memory` (Kubernetes quantities); `largest_nodes` names,
    per resource, the node that has that most. `exceeded` lists the resources that no node
    has enough of, in that order; it is empty when each one fits on some node but no node
    has all three at once.
    """

    compute_pool: str
    accelerator_class: str
    resource_name: str
    pods: int
    requested: dict[str, str]
    node_capacity: dict[str, str]
    largest_nodes: dict[str, str]
    exceeded: list[str]

    def _unit(self, name: str) -> str:
        return self.resource_name if name == "accelerators" else name

    @property
    def detail(self) -> str:
        asks = "the pod asks" if self.pods == 1 else f"each of the {self.pods} pods asks"
        where = f"of class {self.accelerator_class}"
        if self.exceeded:
            wanted = " and ".join(
                f"{self.requested[name]} {self._unit(name)}" for name in self.exceeded
            )
            have = "; ".join(
                f"the largest node of that class has {self.node_capacity[name]} "
                f"{self._unit(name)} ({self.largest_nodes[name]})"
                for name in self.exceeded
            )
            return f"{asks} for {wanted} {where}, but {have}; it could never start."
        wanted = ", ".join(f"{self.requested[n]} {self._unit(n)}" for n in self.requested)
        return (
            f"{asks} for {wanted} {where}, but no node of that class has all of them at once; "
            "it could never start."
        )


def _matches(node: NodeCapacity, node_labels: Mapping[str, str]) -> bool:
    return all(node.labels.get(key) == value for key, value in node_labels.items())


def check_fits_node(
    spec: PodRequest,
    *,
    accelerator_class: str,
    resource_name: str,
    node_labels: Mapping[str, str],
    nodes: Iterable[NodeCapacity],
) -> NodeShortfall | None:
    """The shortfall when nodes of the class exist and none can hold one pod, else None.

    A node of the class carries every one of `node_labels` (an empty mapping: every node).
    A node fits when its allocatable `resource_name` (only when the pod asks for
    accelerators), `cpu` and `memory` are each at least the pod's. Assumes `spec` passed
    `check_workload` (its quantities parse).
    """
    candidates = sorted(
        (node for node in nodes if _matches(node, node_labels)), key=lambda node: node.name
    )
    if not candidates:
        return None
    wanted: dict[str, tuple[str, Decimal]] = {
        "accelerators": (resource_name, Decimal(spec.accelerators)),
        "cpu": ("cpu", parse_quantity(spec.cpu)),
        "memory": ("memory", parse_quantity(spec.memory)),
    }
    if spec.accelerators == 0:
        del wanted["accelerators"]

    def has(node: NodeCapacity, *, name: str) -> Decimal:
        return node.allocatable.get(wanted[name][0], Decimal(0))

    if any(all(has(n, name=r) >= wanted[r][1] for r in wanted) for n in candidates):
        return None
    # Per resource, the node with the most of it (the first by name among equals).
    largest = {name: max(candidates, key=partial(has, name=name)) for name in wanted}
    formats: dict[str, Callable[[Decimal], str]] = {
        "accelerators": lambda amount: str(int(amount)),
        "cpu": format_cpu,
        "memory": format_bytes,
    }
    return NodeShortfall(
        compute_pool=spec.compute_pool,
        accelerator_class=accelerator_class,
        resource_name=resource_name,
        pods=spec.pods,
        requested={name: formats[name](amount) for name, (_, amount) in wanted.items()},
        node_capacity={name: formats[name](has(largest[name], name=name)) for name in wanted},
        largest_nodes={name: largest[name].name for name in wanted},
        exceeded=[name for name in wanted if has(largest[name], name=name) < wanted[name][1]],
    )
