"""Record the Kubernetes calls aicp makes on the golden path, and hold the ClusterRole to them.

aicp (API, reconcile engine, informers) runs against kubesim with its controllers; the test
drives one workload through the golden path using only aicp's HTTP API, so every request
kubesim counts is aicp's own: Project → ComputePool → AcceleratorBinding → Workload → Kueue
admission → Job/Pod → evidence → logs → deletion of the workload, the pool and the project.

`AICP_RECORD_KUBE_CALLS=1` also writes what was observed to `observed_kube_calls.json`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.chart.kube_calls import Attribute, attributes_from_sim_stats, write_observed
from tests.chart.test_rbac_matches_reconciler import OBSERVED, OFF_THE_GOLDEN_PATH, granted
from tests.support.waiting import wait_until

stack_module = pytest.importorskip("tests.integration.steps.stack")


@pytest.fixture
async def stack(
    database_url: str, kube_cluster_with_controllers: Any, tmp_path: Path
) -> AsyncIterator[Any]:
    cluster = kube_cluster_with_controllers
    async for running in stack_module.running_stack(database_url, cluster, tmp_path / "kube"):
        yield running


async def golden_path(stack: Any) -> bool:
    """Run it; True if the API served the workload's logs (a live pods/log read)."""
    await stack.setup_pool()
    await stack.submit("train")
    await stack.wait_state("train", "SUCCEEDED")
    logs = await stack.http.get(f"{stack_module.WORKLOADS}/train/logs", params={"tail": 10})
    assert logs.status_code in (200, 404), logs.text
    for path in (
        f"{stack_module.WORKLOADS}/train",
        f"{stack_module.POOLS}/{stack_module.POOL}",
        f"/api/v1/projects/{stack_module.PROJECT}",
    ):
        response = await stack.http.delete(path)
        assert response.status_code == 202, response.text
        await wait_gone(stack.http, path)
    status: int = logs.status_code
    return status == 200


async def wait_gone(http: httpx.AsyncClient, path: str) -> None:
    async def gone() -> bool:
        return (await http.get(path)).status_code == 404

    done: bool = await wait_until(gone, timeout=20, message=f"{path} deleted")
    assert done


async def observed_calls(stack: Any) -> set[Attribute]:
    stats: dict[str, Any] = await stack.sim("GET", "/_sim/stats")
    return attributes_from_sim_stats(stats)


async def test_the_cluster_role_grants_exactly_the_calls_of_the_golden_path(stack: Any) -> None:
    served_logs = await golden_path(stack)

    observed = await observed_calls(stack)
    if os.environ.get("AICP_RECORD_KUBE_CALLS") == "1":
        write_observed(OBSERVED, observed, source="tests/chart/test_rbac_live.py golden path")

    grants = granted()
    assert sorted(observed - grants) == [], "aicp would get 403 Forbidden"
    assert sorted(grants - observed - OFF_THE_GOLDEN_PATH.keys()) == [], "granted, never used"
    if served_logs:
        assert Attribute("", "pods/log", "get") in observed
