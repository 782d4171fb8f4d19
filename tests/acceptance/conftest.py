"""Acceptance scenarios: every test here runs twice, on kubesim and on the real cluster (the
`cluster` fixture of tests/support/real_cluster.py), through one running aicp replica.

Each test gets its own project (so its own namespace and queues on the shared real cluster)
and a `Scenario` with the setup and reading shortcuts the scenarios share.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.scenario import Scenario as ApiScenario
from tests.support.service import RunningService, start_service


class Scenario(ApiScenario):
    """The scenario API (tests/support/scenario.py) for the test's project on one replica:
    workloads run for a second unless told otherwise, waits last up to 45 s (a real cluster
    is slower than kubesim); plus the cluster's view of a workload's Jobs."""

    def __init__(self, running: RunningService, project: str, backend: str) -> None:
        super().__init__(
            running.client,
            project=project,
            defaults={"env": {"KUBESIM_RUN_SECONDS": "1"}},
            wait_timeout=45,
        )
        self.running = running
        self.backend = backend  # "kubesim" or "real"

    async def jobs(self, uid: str) -> list[dict[str, Any]]:
        """The workload's Jobs as the cluster has them (by the workload uid label)."""
        listed = await self.running.kube.batch.list_namespaced_job(
            self.namespace, label_selector=f"aicp.dev/uid={uid}", _preload_content=False
        )
        items: list[dict[str, Any]] = (await listed.json())["items"]  # type: ignore[attr-defined]  # a raw (_preload_content=False) response
        return items


@pytest.fixture
async def scenario(
    database_url: str, cluster: Any, tmp_path: Path, no_ambient_kubernetes: None
) -> AsyncIterator[Scenario]:
    """One aicp replica on `cluster` (kubesim or real) and a project name of its own."""
    backend = getattr(cluster, "name", "kubesim")
    async with start_service(database_url, cluster, tmp_path) as running:
        yield Scenario(running, f"t{secrets.token_hex(3)}", backend)


# --- the differential check: what aicp observed, per backend, compared after the run ---

OBSERVATIONS = Path(__file__).resolve().parents[2] / ".aicp" / "observations"


async def observe(scenario: Scenario) -> dict[str, Any]:
    """What a user and aicp saw of every workload and service of the scenario, with the names,
    uids and times that differ between runs left out: states and reasons, event types in
    order (and a service's replica counts)."""
    listed = await scenario.running.client.get(f"{scenario.workloads}?limit=500")
    seen: dict[str, Any] = {}
    for item in listed.json().get("items", []) if listed.status_code == 200 else []:
        status = item["status"]
        seen[item["name"]] = {
            "state": status["state"],
            "reason": _normalized(status["reason"] or "", scenario.project),
            "exit_code": status.get("exit_code"),
            "attempts": status.get("attempts"),
            "events": await scenario.event_types(item["name"]),
        }
    services = await scenario.running.client.get(f"{scenario.services}?limit=500")
    for item in services.json().get("items", []) if services.status_code == 200 else []:
        status = item["status"]
        seen[f"service/{item['name']}"] = {
            "state": status["state"],
            "reason": _normalized(status["reason"] or "", scenario.project),
            "replicas": status["replicas"],
            "events": [event["type"] for event in await scenario.service_events(item["name"])],
        }
    return seen


def _normalized(text: str, project: str) -> str:
    import re

    text = text.replace(project, "<project>")
    text = re.sub(r"gpu-node-\d+", "gpu-node-N", text)
    text = re.sub(r"\(pod [a-z0-9-]+ on ", "(pod <pod> on ", text)
    text = re.sub(r"\b\d+(\.\d+)? ?(ms|s|seconds|minutes?)\b", "<duration>", text)
    return re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "<uid>", text)


@pytest.fixture(autouse=True)
async def record_observations(
    request: pytest.FixtureRequest, scenario: Scenario
) -> AsyncIterator[None]:
    """After each scenario, save what was observed for `report_differences` to compare."""
    yield
    import json

    test = request.node.nodeid.split("::")[-1].replace(f"[{scenario.backend}]", "")
    test = test.replace(f"[{scenario.backend}-", "[").replace(f"-{scenario.backend}]", "]")
    target = OBSERVATIONS / scenario.backend / f"{test}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(await observe(scenario), indent=1, sort_keys=True))
