"""A project's limits on both clusters: a pool at its limit is reconciled into a ClusterQueue
that admits work, one past it is refused before anything reaches the cluster, and the limits
cannot be lowered below what the pools hold; raised, they are a new generation the project's
step observes."""

from __future__ import annotations

from tests.acceptance.conftest import Scenario
from tests.support.scenario import CLASS, POOL
from tests.support.waiting import wait_until

LIMITS = {"accelerators": {CLASS: 16}, "cpu": "256", "memory": "2Ti"}


async def test_a_limited_project_runs_work_at_its_limit_and_is_refused_past_it(
    scenario: Scenario,
) -> None:
    client = scenario.running.client
    project = f"/api/v1/projects/{scenario.project}"
    pools = f"{project}/compute-pools"
    quota = {"accelerators": 16, "cpu": "256", "memory": "2Ti"}
    await scenario.setup_pool(quota=quota, limits=LIMITS)

    past = await client.post(
        pools,
        json={
            "name": "grab",
            "accelerator_class": CLASS,
            "quota": {"accelerators": 1, "cpu": "1", "memory": "1Gi"},
        },
    )
    assert past.status_code == 422, past.text
    assert past.json()["exceeded"][0]["limit"] == f"accelerators.{CLASS}"
    grown = await client.patch(f"{pools}/{POOL}", json={"quota": {**quota, "accelerators": 17}})
    assert grown.status_code == 422
    assert (await client.get(f"{pools}/{POOL}")).json()["generation"] == 1
    lowered = await client.patch(project, json={"limits": {"accelerators": {CLASS: 8}}})
    assert lowered.status_code == 409
    assert lowered.json()["type"].endswith("/limit-below-allocation")

    await scenario.submit("fits")
    done = await scenario.wait_state("fits", "SUCCEEDED", "FAILED")
    assert done["status"]["state"] == "SUCCEEDED", done["status"]["reason"]

    raised = await client.patch(project, json={"limits": {"accelerators": {CLASS: 32}}})
    assert raised.status_code == 202, raised.text

    async def observed() -> bool:
        body = (await client.get(project)).json()
        return bool(
            body["status"]["state"] == "READY"
            and body["status"]["observed_generation"] == body["generation"] == 2
        )

    await wait_until(observed, timeout=30, message="project READY at generation 2")
