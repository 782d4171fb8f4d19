"""The service's lifecycle with Kubernetes: not ready until every informer has listed, and a
graceful stop (what SIGTERM triggers) hands its workloads to a peer at once."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import httpx

from kubesim import Cluster
from tests.support.pg_fixtures import connected
from tests.support.scenario import WORKLOADS
from tests.support.service import TEST_LEASE_TTL, TwoReplicas, start_service
from tests.support.waiting import wait_until


async def test_readyz_is_503_naming_the_unsynced_informer_until_it_has_listed_then_200(
    database_url: str,
    kube_cluster_with_controllers: Cluster,
    tmp_path: Path,
    no_ambient_kubernetes: None,
) -> None:
    cluster = kube_cluster_with_controllers
    async with httpx.AsyncClient(base_url=cluster.url) as sim:
        # Node lists fail until the fault is cleared: the Node informer cannot sync.
        fault = {"error_rate": 1.0, "error_code": 500, "error_verbs": ["list"]}
        fault["error_path_regex"] = "^/api/v1/nodes$"
        assert (await sim.post("/_sim/faults", json=fault)).status_code == 200
        async with start_service(database_url, cluster, tmp_path, wait_ready=False) as running:
            not_ready = await running.client.get("/readyz")
            assert not_ready.status_code == 503
            assert not_ready.json()["reasons"] == ["informers not synced: Node"]
            assert (await running.client.get("/healthz")).status_code == 200

            assert (await sim.delete("/_sim/faults")).status_code == 200
            await running.wait_ready(timeout=15)

            ready = await running.client.get("/readyz")
            assert ready.json() == {"status": "ready", "reasons": []}


async def _lease_owner(database_url: str, workload_uid: str) -> str | None:
    async with connected(database_url) as conn:
        owner: str | None = await conn.fetchval(
            "SELECT owner FROM leases WHERE kind = 'workload' AND resource_id = $1",
            uuid.UUID(workload_uid),
        )
        return owner


async def test_a_stopping_replica_releases_its_leases_and_the_peer_takes_over_at_once(
    two_replicas: TwoReplicas,
) -> None:
    first = two_replicas.first
    await first.scenario().setup_pool()
    workload = await first.scenario().submit("long-run", env={"KUBESIM_RUN_SECONDS": "120"})
    await first.scenario().wait_state("long-run", "RUNNING")
    owner_id = await wait_until(
        lambda: _lease_owner(first.database_url, workload["uid"]), message="a lease owner"
    )
    owner = two_replicas.by_instance(owner_id)
    peer = two_replicas.other_than(owner)

    stopped_at = time.monotonic()
    await owner.service.stop()

    async def taken_over() -> bool:
        return await _lease_owner(peer.database_url, workload["uid"]) == peer.instance_id

    await wait_until(taken_over, timeout=TEST_LEASE_TTL / 2, message="the peer holds the lease")
    assert time.monotonic() - stopped_at < TEST_LEASE_TTL / 2  # released, not expired
    # The peer now drives the workload: deleting it through the peer finalizes it.
    deleted = await peer.client.delete(f"{WORKLOADS}/long-run")
    assert deleted.status_code == 202, deleted.text

    async def gone() -> bool:
        return await peer.scenario().workload("long-run") is None

    await wait_until(gone, timeout=15, message="long-run finalized by the peer")
