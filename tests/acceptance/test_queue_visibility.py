"""A queued workload's position is Kueue's own: on both clusters, `status.queue.position` of
every queued workload equals its Workload's place in Kueue's visibility API
(`visibility.kueue.x-k8s.io` pending workloads of the pool's ClusterQueue and LocalQueue,
`positionInClusterQueue` counted from 0, aicp's from 1), as the queue is built, after a
deletion ahead and after a priority change (a replace), and for a burst of equal priority
whose Workloads share a creation second."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.domain.naming import cluster_queue_name, local_queue_name
from tests.acceptance.conftest import Scenario
from tests.support.waiting import wait_until

LONG = {"KUBESIM_RUN_SECONDS": "600"}
VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2"
#: A Job of aicp's is `<workload>-<uid[:6]>-g<generation>` (app.domain.naming.job_name).
_JOB = re.compile(r"^(?P<name>.+)-[0-9a-f]{6}-g(?P<generation>[0-9]+)$")


async def _pending(scenario: Scenario, path: str) -> list[dict[str, Any]]:
    """The pending workloads Kueue's visibility API lists at `path`, head first."""
    answer = await scenario.running.kube.api.call_api(
        f"{VISIBILITY}{path}",
        "GET",
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    body = await answer.json()
    assert body["kind"] == "PendingWorkloadsSummary", body
    items: list[dict[str, Any]] = body["items"]
    return items


def _workload_of(item: dict[str, Any]) -> tuple[str, int]:
    """The aicp workload and generation whose Job owns the Kueue Workload `item`."""
    [owner] = [ref for ref in item["metadata"]["ownerReferences"] if ref["kind"] == "Job"]
    found = _JOB.match(owner["name"])
    assert found is not None, owner
    return found["name"], int(found["generation"])


@dataclass
class Standings:
    """Where Kueue and aicp put each queued workload; falsy until they agree on `expected`."""

    kueue: dict[str, int]  # name -> positionInClusterQueue + 1
    local: dict[str, int]  # name -> positionInLocalQueue + 1
    aicp: dict[str, int]  # name -> status.queue.position
    expected: list[str]

    def __bool__(self) -> bool:
        order = sorted(self.kueue, key=self.kueue.__getitem__)
        return order == self.expected and self.kueue == self.aicp == self.local


async def _standings(scenario: Scenario, expected: list[str]) -> Standings:
    cluster_queue = cluster_queue_name(scenario.project, scenario.pool_name)
    local_queue = local_queue_name(scenario.pool_name)
    in_cluster_queue = await _pending(scenario, f"/clusterqueues/{cluster_queue}/pendingworkloads")
    in_local_queue = await _pending(
        scenario,
        f"/namespaces/{scenario.namespace}/localqueues/{local_queue}/pendingworkloads",
    )
    generations = dict(_workload_of(item) for item in in_cluster_queue)
    aicp: dict[str, int] = {}
    for name, generation in generations.items():
        found = await scenario.workload(name)
        status = (found or {}).get("status") or {}
        if status.get("observed_generation") == generation and status.get("queue"):
            aicp[name] = status["queue"]["position"]
    return Standings(
        kueue={_workload_of(i)[0]: i["positionInClusterQueue"] + 1 for i in in_cluster_queue},
        local={_workload_of(i)[0]: i["positionInLocalQueue"] + 1 for i in in_local_queue},
        aicp=aicp,
        expected=expected,
    )


async def _agree(scenario: Scenario, expected: list[str]) -> None:
    """Wait until Kueue lists exactly `expected`, head first, and aicp says the same."""
    await wait_until(
        lambda: _standings(scenario, expected),
        timeout=scenario.wait_timeout,
        interval=0.2,
        message=f"Kueue's and aicp's queue to be {expected}",
    )


async def _queue_in_its_own_second(scenario: Scenario, name: str, priority: str) -> None:
    """Submit `name` and wait until Kueue lists it and the second of its Workload's creation
    has passed: Kueue orders equal priorities by that second, then by the Workloads' random
    uids, so two Workloads created within one second could come in either order."""
    await scenario.submit(name, priority=priority, env=LONG)
    cluster_queue = cluster_queue_name(scenario.project, scenario.pool_name)

    async def created() -> float | None:
        for item in await _pending(scenario, f"/clusterqueues/{cluster_queue}/pendingworkloads"):
            if _workload_of(item)[0] == name:
                stamp = item["metadata"]["creationTimestamp"].replace("Z", "+00:00")
                return datetime.fromisoformat(stamp).timestamp()
        return None

    second = await wait_until(created, timeout=scenario.wait_timeout, message=f"{name} in Kueue")
    await wait_until(
        lambda: time.time() >= second + 1, timeout=5, message=f"the second after {name}'s"
    )


async def test_queue_positions_agree_with_kueues_visibility_api(scenario: Scenario) -> None:
    await scenario.setup_pool(accelerators=8)
    # The pool's quota fits one workload; a `high` one holds it, so nothing queued preempts.
    await scenario.submit("hold", priority="high", env=LONG)
    await scenario.wait_state("hold", "RUNNING")
    for name, priority in (
        ("wait-low", "low"),
        ("wait-normal-a", "normal"),
        ("wait-high", "high"),
        ("wait-normal-b", "normal"),
    ):
        await _queue_in_its_own_second(scenario, name, priority)

    await _agree(scenario, ["wait-high", "wait-normal-a", "wait-normal-b", "wait-low"])

    # A deletion ahead: everyone behind it moves up, on both sides.
    response = await scenario.running.client.delete(f"{scenario.workloads}/wait-normal-a")
    assert response.status_code == 202, response.text
    await _agree(scenario, ["wait-high", "wait-normal-b", "wait-low"])

    # A priority change (a replace): a new generation, a new Workload, at the back of `high`.
    low = await scenario.workload("wait-low")
    assert low is not None
    spec = dict(low["spec"], priority="high")
    response = await scenario.running.client.put(f"{scenario.workloads}/wait-low", json=spec)
    assert response.status_code == 202, response.text
    await scenario.wait_state("wait-low", "QUEUED", generation=2)
    await _agree(scenario, ["wait-high", "wait-low", "wait-normal-b"])


async def test_a_burst_of_equal_priority_comes_in_kueues_order(scenario: Scenario) -> None:
    """Submitted back to back, their Workloads are created within a second or two: Kueue
    orders them by creation second and then by uid, not by when aicp accepted them."""
    await scenario.setup_pool(accelerators=8)
    await scenario.submit("hold", priority="high", env=LONG)
    await scenario.wait_state("hold", "RUNNING")
    for index in range(4):
        await scenario.submit(f"burst-{index}", env=LONG)
    cluster_queue = cluster_queue_name(scenario.project, scenario.pool_name)

    async def kueues_order() -> list[str] | None:
        items = await _pending(scenario, f"/clusterqueues/{cluster_queue}/pendingworkloads")
        order = [_workload_of(item)[0] for item in items]
        return order if len(order) == 4 else None

    order = await wait_until(kueues_order, timeout=scenario.wait_timeout, message="the burst")
    await _agree(scenario, order)
