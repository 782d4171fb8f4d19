"""One pod of a workload against the nodes of its accelerator class (`app.domain.node_fit`)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from app.domain.node_fit import NodeCapacity, check_fits_node, node_capacity_of
from app.domain.specs import WorkloadSpec

H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def node(name: str, gpus: int, cpu: str = "64", memory: str = "512Gi", **labels: str) -> Any:
    return node_capacity_of(
        {
            "metadata": {"name": name, "labels": {**H100, **labels}},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "cpu": cpu, "memory": memory}},
        }
    )


def spec(**fields: Any) -> WorkloadSpec:
    return WorkloadSpec(name="train", compute_pool="h100-pool", image="busybox", **fields)


def check(workload: WorkloadSpec, nodes: list[NodeCapacity], labels: dict[str, str] = H100) -> Any:
    return check_fits_node(
        workload,
        accelerator_class="h100-80g",
        resource_name="nvidia.com/gpu",
        node_labels=labels,
        nodes=nodes,
    )


def test_a_node_reads_its_labels_and_allocatable_resources_as_numbers() -> None:
    read = node("gpu-node-0", 8, cpu="500m", memory="2Ti")
    assert read.name == "gpu-node-0"
    assert read.labels == H100
    assert read.allocatable == {
        "nvidia.com/gpu": Decimal(8),
        "cpu": Decimal("0.5"),
        "memory": Decimal(2 << 40),
    }


def test_more_accelerators_per_pod_than_the_largest_node_has_is_refused_with_the_numbers() -> None:
    shortfall = check(
        spec(accelerators=16, nodes=2), [node("gpu-node-0", 4), node("gpu-node-1", 8)]
    )
    assert shortfall is not None
    assert shortfall.exceeded == ["accelerators"]
    assert shortfall.requested == {"accelerators": "16", "cpu": "1", "memory": "1Gi"}
    assert shortfall.node_capacity["accelerators"] == "8"
    assert shortfall.largest_nodes["accelerators"] == "gpu-node-1"
    assert shortfall.detail == (
        "each of the 2 pods asks for 16 nvidia.com/gpu of class h100-80g, but the largest node "
        "of that class has 8 nvidia.com/gpu (gpu-node-1); it could never start."
    )


def test_a_pod_that_fits_one_node_is_accepted() -> None:
    assert check(spec(accelerators=8, nodes=2), [node("gpu-node-0", 8)]) is None


def test_cpu_and_memory_count_too_and_the_single_pod_is_named_so() -> None:
    shortfall = check(spec(accelerators=1, cpu="96", memory="1Ti"), [node("gpu-node-0", 8)])
    assert shortfall is not None
    assert shortfall.exceeded == ["cpu", "memory"]
    assert shortfall.detail.startswith("the pod asks for 96 cpu and 1Ti memory of class h100-80g")
    assert "has 64 cpu (gpu-node-0)" in shortfall.detail
    assert "has 512Gi memory (gpu-node-0)" in shortfall.detail


def test_resources_spread_over_different_nodes_do_not_fit_one_pod() -> None:
    nodes = [node("gpu-node-0", 8, cpu="8"), node("gpu-node-1", 2, cpu="64")]
    shortfall = check(spec(accelerators=8, cpu="32"), nodes)
    assert shortfall is not None
    assert shortfall.exceeded == []
    assert "no node of that class has all of them at once" in shortfall.detail


def test_only_nodes_with_every_label_of_the_class_count() -> None:
    other = node("a100-node", 16, **{"nvidia.com/gpu.product": "NVIDIA-A100"})
    shortfall = check(spec(accelerators=16), [other, node("gpu-node-0", 8)])
    assert shortfall is not None and shortfall.largest_nodes["accelerators"] == "gpu-node-0"


def test_no_node_of_the_class_at_all_is_no_refusal() -> None:
    # A cluster autoscaler may still add nodes of the class.
    other = node("a100-node", 4, **{"nvidia.com/gpu.product": "NVIDIA-A100"})
    assert check(spec(accelerators=16), [other]) is None
    assert check(spec(accelerators=16), []) is None


def test_a_cpu_only_pod_ignores_the_accelerator_resource() -> None:
    assert check(spec(accelerators=0, cpu="8"), [node("gpu-node-0", 0)]) is None


def test_a_class_without_node_labels_counts_every_node() -> None:
    shortfall = check(spec(accelerators=16), [node("gpu-node-0", 8)], labels={})
    assert shortfall is not None and shortfall.node_capacity["accelerators"] == "8"
