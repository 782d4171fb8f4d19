"""Compute pool body rules and the workload-fits-its-pool check."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from app.domain.specs import PoolCreate, PoolPatch, Quota, WorkloadSpec
from app.domain.validation import check_fits_pool, check_pool_create, check_pool_patch

QUOTA = {"accelerators": 16, "cpu": "256", "memory": "2Ti"}


def pool(**changes: Any) -> PoolCreate:
    body = {"name": "h100-pool", "accelerator_class": "h100-80g", "quota": QUOTA, **changes}
    return msgspec.json.decode(msgspec.json.encode(body), type=PoolCreate)


def workload(**changes: Any) -> WorkloadSpec:
    body = {"name": "w", "compute_pool": "h100-pool", "image": "i", **changes}
    return msgspec.convert(body, WorkloadSpec)


def test_a_valid_pool_has_no_violations() -> None:
    assert check_pool_create(pool()) == []


def test_an_empty_quota_is_allowed() -> None:
    assert check_pool_create(pool(quota={"accelerators": 0, "cpu": "0", "memory": "0"})) == []


@pytest.mark.parametrize(
    ("changes", "fields"),
    [
        pytest.param({"name": "aicp-pool"}, ["name"], id="reserved-aicp"),
        pytest.param({"name": "kube-pool"}, ["name"], id="reserved-kube"),
        pytest.param({"name": "system-pool"}, ["name"], id="reserved-system"),
        pytest.param({"quota": {**QUOTA, "cpu": "many"}}, ["quota.cpu"], id="quota-cpu"),
        pytest.param({"quota": {**QUOTA, "memory": "2TB"}}, ["quota.memory"], id="quota-memory"),
        pytest.param(
            {"name": "kube-x", "quota": {**QUOTA, "cpu": "-1", "memory": "x"}},
            ["name", "quota.cpu", "quota.memory"],
            id="all-at-once",
        ),
    ],
)
def test_pool_rules_name_every_bad_field(changes: dict[str, Any], fields: list[str]) -> None:
    assert [field for field, _ in check_pool_create(pool(**changes))] == fields


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"name": "a" * 31}, "name", id="name-31"),
        pytest.param({"name": "Pool"}, "name", id="name-uppercase"),
        pytest.param({"quota": {**QUOTA, "accelerators": -1}}, "accelerators", id="quota-negative"),
        pytest.param({"quota": {"cpu": "1", "memory": "1"}}, "accelerators", id="quota-missing"),
        pytest.param({"quota": {**QUOTA, "gpus": 1}}, "gpus", id="quota-unknown-field"),
        pytest.param({"accelerator_class": "H100"}, "accelerator_class", id="class-uppercase"),
    ],
)
def test_pool_schema_violations_name_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(msgspec.ValidationError, match=field):
        pool(**body)


def test_a_patch_checks_the_quota() -> None:
    patch = msgspec.convert({"quota": {**QUOTA, "memory": "lots"}}, PoolPatch)
    assert [field for field, _ in check_pool_patch(patch)] == ["quota.memory"]


QUOTA_STRUCT = msgspec.convert(QUOTA, Quota)


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"accelerators": 8, "replicas": 2}, id="exactly-the-accelerators"),
        pytest.param({"cpu": "128", "replicas": 2}, id="exactly-the-cpu"),
        pytest.param({"memory": "1024Gi", "replicas": 2}, id="exactly-the-memory-other-unit"),
    ],
)
def test_a_workload_that_exactly_fills_its_pool_fits(changes: dict[str, Any]) -> None:
    assert check_fits_pool(workload(**changes), QUOTA_STRUCT, accelerator_class="h100-80g") is None


def test_a_workload_larger_than_its_pool_names_each_resource_short() -> None:
    shortfall = check_fits_pool(
        workload(accelerators=8, replicas=3, cpu="8", memory="1Ti"),
        QUOTA_STRUCT,
        accelerator_class="h100-80g",
    )
    assert shortfall is not None
    assert shortfall.compute_pool == "h100-pool"
    assert shortfall.accelerator_class == "h100-80g"
    assert shortfall.requested == {"accelerators": "24", "cpu": "24", "memory": "3Ti"}
    assert shortfall.pool_capacity == {**QUOTA, "accelerators": "16"}
    assert shortfall.exceeded == ["accelerators", "memory"]
    assert "accelerators 24 > 16" in shortfall.detail and "memory 3Ti > 2Ti" in shortfall.detail


def test_a_cpu_only_workload_against_a_small_pool_reports_millicores() -> None:
    small = msgspec.convert({"accelerators": 0, "cpu": "1", "memory": "1Gi"}, Quota)
    shortfall = check_fits_pool(
        workload(cpu="750m", memory="512Mi", replicas=2), small, accelerator_class="c"
    )
    assert shortfall is not None
    assert shortfall.requested["cpu"] == "1500m"
    assert shortfall.exceeded == ["cpu"]
