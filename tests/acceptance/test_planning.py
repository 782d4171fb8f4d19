"""Planning on both clusters: a queued workload's place in its pool's queue and its estimated
start, as they follow a preemption, a priority change, a deletion ahead and a quota change;
and the what-if admission of a dry run, which writes nothing and agrees with the real submit."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import pytest

from tests.acceptance.conftest import Scenario
from tests.support.waiting import wait_until

LONG = {"KUBESIM_RUN_SECONDS": "600"}


async def _history(scenario: Scenario) -> None:
    """Three finished workloads of the stem `train`: the durations the estimates draw from."""
    for index in (1, 2, 3):
        await scenario.submit(f"train-{index}", accelerators=2)
    for index in (1, 2, 3):
        await scenario.wait_state(f"train-{index}", "SUCCEEDED")


async def _queued(scenario: Scenario, name: str) -> dict[str, Any]:
    """The workload once QUEUED: its first QUEUED status carries its standing."""
    found = await scenario.wait_state(name, "QUEUED")
    assert found["status"]["queue"] is not None, found["status"]
    assert found["status"]["queue"]["computed_at"] is not None, found["status"]
    return found


def _standing(workload: dict[str, Any]) -> tuple[int, list[str]]:
    queue = workload["status"]["queue"]
    return queue["position"], queue["ahead"]


async def _standing_becomes(
    scenario: Scenario, name: str, position: int, ahead: list[str]
) -> dict[str, Any]:
    """The workload once the standing the controller recorded says `position` and `ahead`: it
    looks again on every change of the workload and at least every 30 s while it is queued."""

    async def recorded() -> dict[str, Any] | None:
        found = await scenario.workload(name)
        queue = found["status"]["queue"] if found else None
        if (
            found is None
            or queue is None
            or (queue["position"], queue["ahead"])
            != (
                position,
                ahead,
            )
        ):
            return None
        assert queue["computed_at"] is not None, queue
        return found

    return await wait_until(
        recorded,
        timeout=max(scenario.wait_timeout, 45.0),
        message=f"{name} recorded at position {position} behind {ahead}",
    )


@pytest.mark.timeout(240)  # a recorded standing follows another workload's change within 30 s
async def test_positions_and_estimates_follow_the_queue(scenario: Scenario) -> None:
    await scenario.setup_pool(accelerators=8)
    await _history(scenario)
    await scenario.submit("train-run", priority="high", env=LONG)
    await scenario.wait_state("train-run", "RUNNING")
    await scenario.submit("train-a", priority="low", env=LONG)
    await scenario.submit("train-b", env=LONG)
    await _queued(scenario, "train-a")
    await _queued(scenario, "train-b")
    queued_by = time.time()  # both Kueue Workloads exist: created in this second or before

    # Priority first: the normal one is ahead of the older low one.
    b = await _standing_becomes(scenario, "train-b", 1, [])
    a = await _standing_becomes(scenario, "train-a", 2, ["train-b"])
    assert a["status"]["reason"].startswith("Queued 2nd in pool h100-pool; likely to start ")
    eta = a["status"]["queue"]["eta"]
    assert eta is not None, a["status"]["queue"]["eta_basis"]
    assert eta["earliest"] <= eta["likely"] <= eta["latest"]
    assert "train-run" in a["status"]["queue"]["eta_basis"]
    assert "this pool's finished workloads took" in a["status"]["queue"]["eta_basis"]

    # A priority change (a replace): train-b becomes low and, a new generation, goes behind.
    # Kueue orders equal priorities by their Workloads' creation second, then by uid: the new
    # generation's Workload is behind train-a's only when it is created in a later second.
    await wait_until(lambda: int(time.time()) > int(queued_by), timeout=2, message="a new second")
    spec = dict(b["spec"], priority="low")
    response = await scenario.running.client.put(f"{scenario.workloads}/train-b", json=spec)
    assert response.status_code == 202, response.text
    await scenario.wait_state("train-b", "QUEUED", generation=2)
    await _standing_becomes(scenario, "train-a", 1, [])
    await _standing_becomes(scenario, "train-b", 2, ["train-a"])

    # A deletion ahead moves it up.
    response = await scenario.running.client.delete(f"{scenario.workloads}/train-a")
    assert response.status_code == 202, response.text
    await _standing_becomes(scenario, "train-b", 1, [])

    # A quota change makes room: it is admitted, and its estimate is scored.
    response = await scenario.running.client.patch(
        f"{scenario.pools}/h100-pool", json={"quota": scenario.quota(16)}
    )
    assert response.status_code == 202, response.text
    admitted = await scenario.wait_state("train-b", "ADMITTED", "RUNNING")
    assert admitted["status"]["queue"] is None

    async def scored() -> dict[str, Any] | None:
        found = await scenario.running.client.get(f"{scenario.pools}/h100-pool/forecast-accuracy")
        assert found.status_code == 200, found.text
        body: dict[str, Any] = found.json()
        return body if body["samples"] + body["without_estimate"] >= 1 else None

    accuracy = await wait_until(scored, timeout=scenario.wait_timeout, message="scored")
    assert accuracy["compute_pool"] == "h100-pool"


@pytest.mark.timeout(150)  # the recorded standing follows within a 30 s look
async def test_a_preempted_workload_is_queued_first_again(scenario: Scenario) -> None:
    await scenario.setup_pool(accelerators=8)
    await _history(scenario)
    await scenario.submit("train-low", priority="low", env=LONG)
    await scenario.wait_state("train-low", "RUNNING")
    await scenario.submit("train-urgent", priority="high", env=LONG)
    await scenario.wait_state("train-urgent", "RUNNING")
    low = await scenario.wait_reason("train-low", "Preempted by a higher-priority workload")
    assert low["status"]["state"] == "QUEUED"
    # Recorded as Kueue took it back, perhaps while train-urgent's row still said QUEUED: the
    # controller's next look (within 30 s) has it first.
    low = await _standing_becomes(scenario, "train-low", 1, [])
    assert low["status"]["reason"].startswith("Queued 1st in pool h100-pool; ")
    assert "train-urgent" in low["status"]["queue"]["eta_basis"]


async def _counts(scenario: Scenario) -> dict[str, int]:
    """What a write would leave behind: rows, events, leases, Jobs in the namespace."""
    conn = await asyncpg.connect(scenario.running.database_url)
    try:
        rows = await conn.fetchval("SELECT count(*) FROM workloads")
        events = await conn.fetchval("SELECT count(*) FROM events")
        leases = await conn.fetchval("SELECT count(*) FROM leases")
        forecasts = await conn.fetchval("SELECT count(*) FROM workload_forecasts")
    finally:
        await conn.close()
    jobs = await scenario.running.kube.batch.list_namespaced_job(
        scenario.namespace, _preload_content=False
    )
    return {
        "rows": rows,
        "events": events,
        "leases": leases,
        "forecasts": forecasts,
        "jobs": len((await jobs.json())["items"]),  # type: ignore[attr-defined]  # a raw response
    }


async def _dry(scenario: Scenario, name: str, **changes: Any) -> dict[str, Any]:
    response = await scenario.running.client.post(
        f"{scenario.workloads}?dry_run=true", json=scenario.workload_body(name, **changes)
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_dry_run_forecasts_what_the_real_submit_then_does(scenario: Scenario) -> None:
    await scenario.setup_pool(accelerators=8)
    await _history(scenario)

    before = await _counts(scenario)
    fits = await _dry(scenario, "train-x", accelerators=4, env=LONG)
    assert fits["admission"]["verdict"] == "admit_now", fits["admission"]
    assert await _counts(scenario) == before
    await scenario.submit("train-x", accelerators=4, env=LONG)
    await scenario.wait_state("train-x", "RUNNING")

    before = await _counts(scenario)
    waits = (await _dry(scenario, "train-y", accelerators=8, env=LONG))["admission"]
    assert waits["verdict"] == "queue" and waits["position"] == 1, waits
    assert "8 accelerators (free 4)" in waits["reason"]
    quota = {n["resource"]: n for n in waits["quota"]}
    assert quota["accelerators"] == {
        "resource": "accelerators",
        "quota": "8",
        "in_use": "4",
        "free": "4",
        "requested": "8",
    }
    urgent = (await _dry(scenario, "train-z", accelerators=8, priority="high"))["admission"]
    assert urgent["verdict"] == "preempt" and urgent["preempts"] == ["train-x"], urgent
    assert await _counts(scenario) == before

    never = await scenario.running.client.post(
        f"{scenario.workloads}?dry_run=true",
        json=scenario.workload_body("train-huge", accelerators=16),
    )
    assert never.status_code == 422 and never.json()["type"].endswith("exceeds-pool-capacity")

    await scenario.submit("train-y", accelerators=8, env=LONG)
    queued = await _queued(scenario, "train-y")
    assert _standing(queued) == (1, [])


@pytest.mark.timeout(180)  # the burst's recorded positions settle within a 30 s look
async def test_fifty_dry_runs_during_a_burst_of_submits_change_nothing(scenario: Scenario) -> None:
    await scenario.setup_pool(accelerators=8)
    await scenario.submit("hold", env=LONG)
    await scenario.wait_state("hold", "RUNNING")

    async def dry(index: int) -> int:
        response = await scenario.running.client.post(
            f"{scenario.workloads}?dry_run=true",
            json=scenario.workload_body(f"probe-{index}", env=LONG),
        )
        assert response.status_code == 200, response.text
        assert response.json()["admission"]["verdict"] == "queue"
        return response.status_code

    async def real(index: int) -> None:
        await scenario.submit(f"burst-{index}", env=LONG)

    await asyncio.gather(*(dry(i) for i in range(50)), *(real(i) for i in range(5)))
    listed = await scenario.running.client.get(f"{scenario.workloads}?limit=500")
    names = sorted(item["name"] for item in listed.json()["items"])
    assert names == sorted(["hold", *(f"burst-{i}" for i in range(5))])
    for index in range(5):
        await _queued(scenario, f"burst-{index}")

    async def positions() -> list[int] | None:
        found = [await scenario.workload(f"burst-{index}") for index in range(5)]
        seen = sorted(w["status"]["queue"]["position"] for w in found if w is not None)
        return seen if seen == [1, 2, 3, 4, 5] else None

    await wait_until(positions, timeout=max(scenario.wait_timeout, 45.0), message="positions")
    conn = await asyncpg.connect(scenario.running.database_url)
    try:
        probes = await conn.fetchval(
            "SELECT count(*) FROM events WHERE resource_name LIKE 'probe-%'"
        )
    finally:
        await conn.close()
    assert probes == 0
