"""A ResourceFlavor has one shape, and a binding in use cannot change under admitted pods."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.support.scenario import CLASS, Scenario

H100 = {
    "resource_name": "nvidia.com/gpu",
    "flavor": "shared-flavor",
    "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
}


async def put(api: Scenario, accelerator_class: str, body: dict[str, Any]) -> Any:
    return await api.client.put(f"/api/v1/accelerator-bindings/{accelerator_class}", json=body)


async def test_a_second_class_naming_a_flavor_with_other_labels_is_422_naming_flavor(
    api: Scenario,
) -> None:
    assert (await put(api, "h100", H100)).status_code == 201
    other = {**H100, "node_labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}}
    refused = await put(api, "a100", other)
    assert refused.status_code == 422, refused.text
    [error] = refused.json()["errors"]
    assert error["field"] == "flavor" and "'h100'" in error["message"]
    tolerating = {**H100, "tolerations": [{"key": "x", "operator": "Exists"}]}
    assert (await put(api, "a100", tolerating)).status_code == 422
    # The same shape under another class renders the same flavor: nothing to fight over.
    assert (await put(api, "h100-alias", H100)).status_code == 201
    assert (await put(api, "a100", {**other, "flavor": "a100-flavor"})).status_code == 201


async def test_concurrent_conflicting_bindings_for_one_flavor_let_exactly_one_in(
    api: Scenario,
) -> None:
    bodies = [
        {**H100, "node_labels": {"nvidia.com/gpu.product": f"product-{index}"}}
        for index in range(6)
    ]
    answers = await asyncio.gather(
        *(put(api, f"class-{index}", body) for index, body in enumerate(bodies))
    )
    assert sorted(answer.status_code for answer in answers) == [201] + [422] * 5


async def test_an_owner_may_reshape_its_flavor_while_no_one_shares_it(api: Scenario) -> None:
    assert (await put(api, "h100", H100)).status_code == 201
    reshaped = {**H100, "node_labels": {"nvidia.com/gpu.product": "H100-NVL"}}
    assert (await put(api, "h100", reshaped)).status_code == 200
    assert (await put(api, "h100-alias", H100)).status_code == 422


async def test_changing_a_binding_under_unfinished_workloads_is_409_in_use(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.submit("train-7b")
    current = (await api.client.get(f"/api/v1/accelerator-bindings/{CLASS}")).json()
    body = {key: current[key] for key in ("resource_name", "flavor", "node_labels", "tolerations")}
    for change in (
        {"node_labels": {"nvidia.com/gpu.product": "other"}},
        {"flavor": "another-flavor"},
        {"resource_name": "amd.com/gpu"},
        {"tolerations": [{"key": "k", "operator": "Exists"}]},
    ):
        refused = await put(api, CLASS, {**body, **change})
        assert refused.status_code == 409, refused.text
        problem = refused.json()
        assert problem["type"].endswith("/in-use")
        assert problem["referenced_by"] == ["workload/research/train-7b"]
    described = await put(api, CLASS, {**body, "description": "H100 SXM5"})
    assert described.status_code == 200, described.text
    deleted = await api.client.delete("/api/v1/projects/research/workloads/train-7b")
    assert deleted.status_code == 202


async def test_invalid_bindings_report_every_field_kubernetes_would_refuse(api: Scenario) -> None:
    body = {
        "resource_name": "cpu",
        "flavor": "f",
        "node_labels": {"bad key": "v", **{f"l{i}": "v" for i in range(8)}},
        "tolerations": [
            {"operator": "Equal", "value": "x"},
            {"key": "k", "operator": "Exists", "value": ""},
        ],
    }
    refused = await put(api, "bad", body)
    assert refused.status_code == 422, refused.text
    fields = {error["field"] for error in refused.json()["errors"]}
    assert {"resource_name", "node_labels", "node_labels.bad key", "tolerations.0.operator",
            "tolerations.1.value"} <= fields  # fmt: skip
