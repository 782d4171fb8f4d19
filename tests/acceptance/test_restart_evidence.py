"""After aicp restarts every rank of a multi-node workload (one rank failed, retries left), the
workload's evidence describes the new attempt: its Job, its pods, nothing of how the first
attempt ended."""

from __future__ import annotations

from typing import Any

import pytest

from tests.acceptance.conftest import Scenario
from tests.support.waiting import wait_until


@pytest.mark.timeout(120)
async def test_after_a_group_restart_the_ranks_are_the_new_attempts_pods(
    scenario: Scenario,
) -> None:
    await scenario.setup_pool(accelerators=16)
    # Rank 0 fails halfway through each attempt; the second attempt runs for seconds first.
    env = {"KUBESIM_RUN_SECONDS": "20", "KUBESIM_FAIL_RANK": "0", "KUBESIM_EXIT_CODE": "2"}
    await scenario.submit("flaky", nodes=2, retries=1, env=env)

    async def second_attempt_running() -> dict[str, Any] | None:
        found = await scenario.workload("flaky")
        assert found is not None
        status = found["status"]
        running = status["state"] == "RUNNING" and status["attempts"] == 2
        return found if running and "2 of 2 pods running" in status["reason"] else None

    found = await wait_until(
        second_attempt_running, timeout=60, interval=0.1, message="attempt 2 running"
    )
    status = found["status"]
    pods = await scenario.running.kube.core.list_namespaced_pod(
        scenario.namespace, label_selector=f"aicp.dev/uid={found['uid']}"
    )
    live = {
        pod.metadata.name: pod
        for pod in pods.items
        if pod.metadata.deletion_timestamp is None and pod.status.phase == "Running"
    }
    assert len(live) == 2
    job = status["job"]["name"]
    assert all(pod.metadata.labels.get("job-name") == job for pod in live.values())
    ranks = status["ranks"]
    assert [rank["rank"] for rank in ranks] == [0, 1]
    assert {rank["pod"] for rank in ranks} == set(live)
    assert all(rank["phase"] == "Running" for rank in ranks)
    assert all(rank["exit_code"] is None and rank["finished_at"] is None for rank in ranks)
    assert status["exit_code"] is None and status["finished_at"] is None
