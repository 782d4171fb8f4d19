"""Changes a workload lives through, on both clusters: preemption by a higher priority in its
pool, an immutable replacement, drift (its Job deleted by hand, its labels removed), and
deletion in every state."""

from __future__ import annotations

from typing import Any

import pytest

from app.kube.apply import get
from app.kube.resources import LOCAL_QUEUES, NAMESPACES
from tests.acceptance.conftest import Scenario
from tests.support.scenario import POOL
from tests.support.waiting import wait_until


async def test_a_high_priority_workload_preempts_a_low_one_which_is_requeued(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=8)
    await scenario.start_running("low", priority="low")
    await scenario.submit("urgent", priority="high", env={"KUBESIM_RUN_SECONDS": "600"})

    await scenario.wait_state("urgent", "RUNNING")
    low = await scenario.wait_reason("low", "Preempted by a higher-priority workload")
    assert low["status"]["state"] == "QUEUED"
    assert "requeued in pool h100-pool" in low["status"]["reason"]
    types = await scenario.event_types("low")
    assert types.count("Started") == 1 and "Preempted" in types


async def test_a_replaced_spec_gets_a_new_job_for_its_new_generation(scenario: Scenario) -> None:
    await scenario.setup_pool()
    first = await scenario.submit("tune", env={"KUBESIM_RUN_SECONDS": "600"})
    running = await scenario.wait_state("tune", "RUNNING")
    old_job = running["status"]["job"]

    spec = dict(first["spec"], env={"KUBESIM_RUN_SECONDS": "1"}, accelerators=4)
    spec.pop("name", None)
    response = await scenario.running.client.put(
        f"{scenario.workloads}/tune", json={"name": "tune", **spec}
    )
    assert response.status_code == 202, response.text
    assert response.json()["generation"] == 2

    done = await scenario.wait_state("tune", "SUCCEEDED")
    assert done["status"]["observed_generation"] == 2
    assert done["status"]["job"]["name"] != old_job["name"]
    assert done["status"]["accelerator"]["count"] == 4
    jobs = await scenario.jobs(done["uid"])
    assert [job["metadata"]["name"] for job in jobs] == [done["status"]["job"]["name"]]
    assert "SpecUpdated" in await scenario.event_types("tune")


async def test_a_job_deleted_by_hand_is_recreated_as_a_second_attempt(scenario: Scenario) -> None:
    await scenario.setup_pool()
    running = await scenario.start_running("victim")
    job = running["status"]["job"]
    await scenario.running.kube.batch.delete_namespaced_job(
        job["name"], scenario.namespace, propagation_policy="Background", _preload_content=False
    )

    async def running_again() -> dict[str, Any] | None:
        found = await scenario.workload("victim")
        status = found["status"] if found else {}
        again = status.get("state") == "RUNNING" and status["job"]["uid"] != job["uid"]
        return found if again else None

    again = await wait_until(running_again, timeout=45, message="a new Job running")
    assert again["status"]["job"]["name"] == job["name"]
    assert again["status"]["attempts"] == 2
    assert "DriftCorrected" in await scenario.event_types("victim")


# A real namespace controller deletes a namespace's pods first and waits out their grace
# period (30 s by default) before it deletes the Jobs and then the namespace itself: the
# namespace is gone well after the 60 s an acceptance test otherwise gets has begun.
@pytest.mark.timeout(240)
async def test_a_namespace_deleted_by_hand_comes_back_and_its_running_workload_ends_honestly(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool()
    running = await scenario.start_running("inside")
    job = running["status"]["job"]
    kube = scenario.running.kube
    before = await get(kube, NAMESPACES, None, scenario.namespace)
    assert before is not None

    await kube.core.delete_namespace(scenario.namespace, _preload_content=False)

    async def namespace_back() -> bool:
        found = await get(kube, NAMESPACES, None, scenario.namespace)
        return (
            found is not None
            and found["metadata"]["uid"] != before["metadata"]["uid"]
            and not found["metadata"].get("deletionTimestamp")
        )

    await wait_until(namespace_back, timeout=120, message="the namespace re-created")
    queue = await wait_until(
        lambda: get(kube, LOCAL_QUEUES, scenario.namespace, POOL),
        timeout=30,
        message="the LocalQueue re-created",
    )
    assert queue["spec"]["clusterQueue"].startswith(f"aicp-{scenario.project}")

    async def pool_drift() -> list[str]:
        response = await scenario.running.client.get(
            f"/api/v1/projects/{scenario.project}/compute-pools/{POOL}/events?limit=500"
        )
        items = response.json()["items"]
        return [e["message"] for e in items if e["type"] == "DriftCorrected"]

    drift = await wait_until(pool_drift, timeout=30, message="the pool's DriftCorrected")
    assert any(f"LocalQueue {POOL} is missing" in message for message in drift), drift

    async def ended_honestly() -> dict[str, Any] | None:
        found = await scenario.workload("inside")
        status = found["status"] if found else {}
        if status.get("state") in ("ADMITTED", "RUNNING"):
            # Never reported admitted or running on a Job the cluster no longer has.
            uids = [j["metadata"]["uid"] for j in await scenario.jobs(running["uid"])]
            assert status["job"]["uid"] in uids, (status, uids)
        again = status.get("state") == "RUNNING" and status["job"]["uid"] != job["uid"]
        return found if again or status.get("state") == "FAILED" else None

    # kubesim deletes the namespace's Jobs at once: aicp records the evidence and runs the
    # workload again. A real namespace controller deletes the pods first, which fails a Job
    # without retries: the workload fails, saying why.
    ended = await wait_until(ended_honestly, timeout=150, message="the workload ended honestly")
    if ended["status"]["state"] == "FAILED":
        reason = ended["status"]["reason"]
        assert f"Namespace {scenario.namespace} was being deleted outside aicp" in reason, reason
    else:
        assert ended["status"]["attempts"] == 2
        recreated = [e for e in await scenario.events("inside") if e["type"] == "DriftCorrected"]
        assert len(recreated) == 1, recreated
        assert job["name"] in recreated[0]["message"] and "attempt 2" in recreated[0]["message"]

    await scenario.submit("after")
    await scenario.wait_state("after", "SUCCEEDED", timeout=90)
    metrics = (await scenario.running.client.get("/metrics")).text
    assert 'aicp_drift_corrections_total{kind="Namespace"}' in metrics


async def test_labels_removed_from_a_job_by_hand_are_put_back(scenario: Scenario) -> None:
    await scenario.setup_pool()
    running = await scenario.start_running("labelled")
    name = running["status"]["job"]["name"]
    await scenario.running.kube.batch.patch_namespaced_job(
        name,
        scenario.namespace,
        [{"op": "remove", "path": "/metadata/labels/aicp.dev~1workload"}],
        _content_type="application/json-patch+json",
        _preload_content=False,
    )

    async def restored() -> bool:
        jobs = await scenario.jobs(running["uid"])
        return bool(jobs) and "aicp.dev/workload" in jobs[0]["metadata"]["labels"]

    await wait_until(restored, timeout=45, message="the label put back")

    await scenario.wait_event("labelled", "DriftCorrected", timeout=10)


@pytest.mark.parametrize(
    ("state", "env", "accelerators"),
    [
        pytest.param("QUEUED", {"KUBESIM_RUN_SECONDS": "600"}, 8, id="queued"),
        pytest.param("RUNNING", {"KUBESIM_RUN_SECONDS": "600"}, 8, id="running"),
        pytest.param("SUCCEEDED", {"KUBESIM_RUN_SECONDS": "0.5"}, 8, id="succeeded"),
        pytest.param(
            "FAILED", {"KUBESIM_EXIT_CODE": "2", "KUBESIM_RUN_SECONDS": "0.5"}, 8, id="failed"
        ),
    ],
)
async def test_a_workload_deleted_in_any_state_is_gone_with_its_job(
    scenario: Scenario, state: str, env: dict[str, str], accelerators: int
) -> None:
    await scenario.setup_pool(accelerators=16)
    if state == "QUEUED":  # the pool's quota is taken by a workload ahead of it
        await scenario.submit(
            "ahead", accelerators=8, replicas=2, env={"KUBESIM_RUN_SECONDS": "600"}
        )
        await scenario.wait_state("ahead", "ADMITTED", "RUNNING")
    await scenario.submit("doomed", accelerators=accelerators, env=env)
    reached = await scenario.wait_state("doomed", state)

    response = await scenario.running.client.delete(f"{scenario.workloads}/doomed")
    assert response.status_code == 202, response.text
    await scenario.wait_gone("doomed")
    assert await scenario.jobs(reached["uid"]) == []


async def test_a_pool_deleted_takes_its_finished_workloads_along_and_their_jobs(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=16)
    await scenario.submit("done", env={"KUBESIM_RUN_SECONDS": "0.5"})
    await scenario.submit("broken", env={"KUBESIM_EXIT_CODE": "2", "KUBESIM_RUN_SECONDS": "0.5"})
    done = await scenario.wait_state("done", "SUCCEEDED")
    await scenario.wait_state("broken", "FAILED")
    pool = f"/api/v1/projects/{scenario.project}/compute-pools/h100-pool"

    response = await scenario.running.client.delete(pool)
    assert response.status_code == 202, response.text

    async def pool_gone() -> bool:
        return (await scenario.running.client.get(pool)).status_code == 404

    await wait_until(pool_gone, timeout=60, message="pool finalized with its workloads")
    assert await scenario.workload("done") is None and await scenario.workload("broken") is None
    assert await scenario.jobs(done["uid"]) == []
