"""Kueue's all-or-nothing start (`waitForPodsReady`) on both clusters, through aicp's API: a
two-node workload whose rank 1 never starts is evicted when the pods-ready timeout passes, aicp
says so in a sentence and an event, and the workload is not lost: it goes back to the queue and
is admitted again.

The timeout is the cluster's own: kubesim's (300 s by default, or
`KUBESIM_WAIT_FOR_PODS_READY_SECONDS`) is passed by moving kubesim's clock forward; the real
cluster's Kueue runs on the wall clock, so there the test runs only when the session's cluster
was started with a short timeout (`KUBESIM_WAIT_FOR_PODS_READY_SECONDS=20`, which both clusters
read; `make test-real` runs this file so, on a cluster of its own) and is skipped, saying so,
with Kueue's 5 minutes."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.controllers import WaitForPodsReady
from tests.acceptance.conftest import Scenario
from tests.support.waiting import wait_until

#: The longest pods-ready timeout plus requeuing back-off the real cluster is waited out for.
REAL_CLUSTER_LONGEST_WAIT = 120.0


def _pods_ready(scenario: Scenario) -> tuple[float, float]:
    """The cluster's pods-ready timeout and its first requeuing back-off, in seconds."""
    cluster = scenario.running.cluster
    if scenario.backend == "kubesim":
        ready = cluster.wait_for_pods_ready or WaitForPodsReady.from_env()
        return ready.timeout, float(ready.backoff_base_seconds)
    options = cluster.cluster.options
    return options.pods_ready_timeout, float(options.pods_ready_backoff_base_seconds)


async def _pass_time(scenario: Scenario, seconds: float) -> None:
    """On kubesim, move its clock `seconds` forward (as `POST /_sim/time` does); the real
    cluster's clock runs by itself."""
    if scenario.backend == "kubesim":
        scenario.running.cluster.clock.advance(seconds)


@pytest.mark.timeout(300)  # a real cluster waits out its timeout and back-off on the wall clock
async def test_a_gang_that_never_fully_starts_is_requeued_and_admitted_again(
    scenario: Scenario,
) -> None:
    timeout, backoff = _pods_ready(scenario)
    if scenario.backend != "kubesim" and timeout + backoff > REAL_CLUSTER_LONGEST_WAIT:
        pytest.skip(
            f"the real cluster's Kueue waits {timeout:g} s for pods to be ready and {backoff:g} s "
            "before it requeues: start it with KUBESIM_WAIT_FOR_PODS_READY_SECONDS=20 to run this"
        )
    await scenario.setup_pool(accelerators=16)
    env = {"KUBESIM_RUN_SECONDS": "600", "KUBESIM_PENDING_RANK": "1"}
    accepted = await scenario.submit("stuck", nodes=2, env=env)
    uid = accepted["uid"]

    waiting = await scenario.wait_reason("stuck", "1 of 2 pods running on node ")
    assert waiting["status"]["state"] == "RUNNING"

    await _pass_time(scenario, timeout)
    wait = timeout + 45
    requeued = await scenario.wait_reason("stuck", "Requeued: ", timeout=wait)
    status = requeued["status"]
    assert status["state"] == "QUEUED"
    # The queue standing leads the reason of a queued workload; the requeue sentence follows.
    said = status["reason"][status["reason"].index("Requeued: ") :]
    assert said.startswith("Requeued: 1 of 2 pods were running after ")
    assert said.endswith("; the workload goes back to the queue.")
    events = await scenario.events("stuck")
    told = [e for e in events if e["type"] == "Requeued"]
    assert told and told[0]["message"] == said

    # Nothing is lost: the same workload, queued again, is admitted again after the back-off.
    await _pass_time(scenario, backoff)

    async def admitted_again() -> dict[str, Any] | None:
        found = await scenario.workload("stuck")
        assert found is not None, "the requeued workload is gone"
        if found["status"]["state"] != "RUNNING":
            return None
        return found if "1 of 2 pods running" in found["status"]["reason"] else None

    again = await wait_until(
        admitted_again, timeout=backoff + 45, interval=0.2, message="stuck admitted again"
    )
    assert again["uid"] == uid
    types = await scenario.event_types("stuck")
    after = types[types.index("Requeued") + 1 :]
    assert "Admitted" in after and "Started" in after
