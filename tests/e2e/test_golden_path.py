"""The golden path across two replicas (docs/DESIGN.md §2, §5): one replica crashes while its
workloads run; its peer takes them over when the leases expire and finishes them with their
evidence complete, never creating a second Job for any of them.

(The README walkthrough itself runs against `python -m app dev` in test_service_devmode.py.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubesim import Cluster
from tests.support.pg_fixtures import connected
from tests.support.service import RunningService, start_service
from tests.support.waiting import wait_until

PROJECT = "research"
WORKLOADS = f"/api/v1/projects/{PROJECT}/workloads"
LEASE_TTL = 3.0


@pytest.fixture
async def replicas(
    database_url: str,
    kube_cluster_with_controllers: Cluster,
    tmp_path: Path,
    no_ambient_kubernetes: None,
) -> AsyncIterator[tuple[RunningService, RunningService]]:
    """Two replicas with short leases on one database and one kubesim."""
    cluster = kube_cluster_with_controllers
    async with (
        start_service(
            database_url, cluster, tmp_path, instance_id="replica-a", lease_ttl_seconds=LEASE_TTL
        ) as first,
        start_service(
            database_url, cluster, tmp_path, instance_id="replica-b", lease_ttl_seconds=LEASE_TTL
        ) as second,
    ):
        yield first, second


async def _workload_owners(database_url: str) -> dict[str, str]:
    """Workload name → the replica holding its live lease."""
    async with connected(database_url) as conn:
        rows = await conn.fetch(
            "SELECT w.name, l.owner FROM leases l JOIN workloads w ON w.id = l.resource_id "
            "WHERE l.kind = 'workload' AND l.expires_at > now()"
        )
    return {r["name"]: r["owner"] for r in rows}


async def test_a_crashed_replicas_running_workloads_finish_on_its_peer_with_their_evidence(
    replicas: tuple[RunningService, RunningService],
) -> None:
    first, second = replicas
    await first.api.put_binding("h100-80g")
    await first.api.create_project(PROJECT)
    pool = {
        "name": "h100-pool",
        "accelerator_class": "h100-80g",
        "quota": {"accelerators": 16, "cpu": "256", "memory": "2Ti"},
    }
    response = await first.client.post(f"/api/v1/projects/{PROJECT}/compute-pools", json=pool)
    assert response.status_code == 202, response.text
    names = [f"train-{n}" for n in range(4)]
    for index, name in enumerate(names):
        body = {
            "name": name,
            "compute_pool": "h100-pool",
            "image": "ghcr.io/acme/train:1.4",
            "accelerators": 4,
            "cpu": "8",
            "memory": "64Gi",
            "env": {"KUBESIM_RUN_SECONDS": "600"},
        }
        via = first if index % 2 == 0 else second
        response = await via.client.post(WORKLOADS, json=body)
        assert response.status_code == 202, response.text
    running = {name: await first.scenario().wait_state(name, "RUNNING") for name in names}

    owners = await _workload_owners(first.database_url)
    assert set(owners) == set(names)
    crashed_id = max(("replica-a", "replica-b"), key=list(owners.values()).count)
    crashed, peer = (first, second) if crashed_id == "replica-a" else (second, first)
    taken_over = sorted(name for name, owner in owners.items() if owner == crashed_id)
    assert crashed.service.reconciler is not None
    await crashed.service.reconciler.halt()  # a crash: its leases stay until they expire

    async def peer_holds_everything() -> bool:
        held = await _workload_owners(first.database_url)
        return set(held) == set(names) and set(held.values()) == {peer.instance_id}

    await wait_until(peer_holds_everything, timeout=LEASE_TTL + 10, message="takeover")
    first.cluster.clock.advance(600)  # every workload's run ends

    for name in names:
        done = await peer.scenario().wait_state(name, "SUCCEEDED")
        status: dict[str, Any] = done["status"]
        assert status["job"] == running[name]["status"]["job"]  # the same Job, adopted
        assert status["nodes"] == running[name]["status"]["nodes"]
        assert status["attempts"] == 1 and status["exit_code"] == 0
        assert status["accelerator"]["product"] == "NVIDIA-H100-80GB-HBM3"
        jobs = await peer.kube.batch.list_namespaced_job(
            f"aicp-{PROJECT}", label_selector=f"aicp.dev/uid={done['uid']}", _preload_content=False
        )
        items = (await jobs.json())["items"]  # type: ignore[attr-defined]  # a raw (_preload_content=False) response
        assert len(items) == 1 and not items[0]["metadata"].get("finalizers")
    for name in taken_over:
        events = (await peer.client.get(f"{WORKLOADS}/{name}/events")).json()["items"]
        finished = [e for e in events if e["type"] == "Succeeded"]
        assert [e["actor"] for e in finished] == [f"controller:{peer.instance_id}"]
