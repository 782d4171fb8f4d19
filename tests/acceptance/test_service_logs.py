"""A service's replicas' logs through the API: every replica's lines with its pod's name, one
replica's alone, and a clear 404 for a pod that is not one of its replicas."""

from __future__ import annotations

import pytest

from tests.acceptance.conftest import Scenario


async def test_the_logs_of_a_services_replicas(scenario: Scenario) -> None:
    if scenario.backend != "kubesim":
        pytest.skip("the real cluster's fake kubelet runs no containers: its logs are empty")
    await scenario.setup_pool(accelerators=4)
    await scenario.create_service("chat", replicas=2, env={"KUBESIM_LOG": "serving on :8000"})
    ready = await scenario.wait_service("chat", "READY")
    pods = [pod["name"] for pod in ready["status"]["pods"]]

    both = await scenario.client.get(f"{scenario.services}/chat/logs")
    assert both.status_code == 200, both.text
    assert both.text.splitlines() == [f"[{pod}] serving on :8000" for pod in sorted(pods)]

    one = await scenario.client.get(f"{scenario.services}/chat/logs", params={"pod": pods[0]})
    assert one.text == "serving on :8000\n"

    other = await scenario.client.get(f"{scenario.services}/chat/logs", params={"pod": "nope"})
    assert other.status_code == 404
    assert other.json()["detail"] == "Service 'chat' has no replica pod 'nope'."
