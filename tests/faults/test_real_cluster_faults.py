"""kill -9 and SIGSTOP/SIGCONT against the real cluster (kube-apiserver, Job controller, Kueue,
KWOK; docs/REAL-CLUSTER.md): the scenarios of test_process_faults.py, with the real apiserver
as the oracle instead of kubesim.

Two `python -m app serve` replicas share one database and talk to the real apiserver with the
least-privilege kubeconfig aicp gets there (the chart's ClusterRole). The cluster's account of
every Job is a watch on Jobs in every namespace that the test opens before the first Job
(`tests/faults/real_history.py`). Bursts are small (60 workloads on 16 GPUs) so that each
scenario takes a minute or two; `make test-real` runs them.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.faults.figures import record
from tests.faults.leases import incarnations, none_live, peer_holds_all_unfinished, taken_over
from tests.faults.processes import Replica
from tests.faults.real_history import WatchedJobHistory
from tests.faults.workloads import (
    PROJECT,
    Answers,
    Careful,
    Database,
    assert_invariants,
    jobs_created,
    submit_burst,
    wait_converged,
)
from tests.support.real_cluster import RealBackend
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.real_cluster, pytest.mark.timeout(600)]

LEASE_TTL = 3.0
BURST = 60
GPUS = 16  # the real cluster's two fake nodes


@pytest.fixture
async def real_history(real_cluster: RealBackend) -> AsyncIterator[WatchedJobHistory]:
    """The cluster's own record of every Job of aicp, from before the first one."""
    await _wait_namespace_gone(real_cluster, f"aicp-{PROJECT}")  # an earlier test's
    watched = WatchedJobHistory(
        real_cluster.url,
        token=real_cluster.cluster.tokens["admin"],
        ca_file=str(real_cluster.cluster.ca_file),
    )
    await watched.start()
    try:
        yield watched
    finally:
        await watched.stop()


@pytest.fixture
async def replicas(
    real_cluster: RealBackend, real_history: WatchedJobHistory, database_url: str, tmp_path: Path
) -> AsyncIterator[tuple[Replica, Replica]]:
    """Two replicas (not started) on one database, with aicp's least-privilege kubeconfig;
    stopped afterwards, and what the test left in the cluster removed."""
    kubeconfig = real_cluster.write_kubeconfig(tmp_path / "aicp-kubeconfig")
    made = tuple(
        Replica(
            name,
            database_url=database_url,
            kubeconfig=kubeconfig,
            log_dir=tmp_path,
            lease_ttl=LEASE_TTL,
        )
        for name in ("replica-a", "replica-b")
    )
    try:
        yield made
    finally:
        for one in made:
            await one.stop()
        await real_cluster.clean()


async def _wait_namespace_gone(backend: RealBackend, name: str) -> None:
    async with backend.api_client() as api:
        core = client.CoreV1Api(api)

        async def gone() -> bool:
            try:
                await core.read_namespace(name)
            except ApiException as exc:
                if exc.status == 404:
                    return True
                raise
            return False

        await wait_until(gone, timeout=120, interval=0.5, message=f"namespace {name} gone")


async def _started(pair: tuple[Replica, Replica]) -> tuple[Replica, Replica, Answers]:
    a, b = pair
    await asyncio.gather(a.start(), b.start())
    await asyncio.gather(a.wait_ready(60), b.wait_ready(60))
    answers = Answers()
    await Careful([a, b], answers).setup_pool(GPUS)
    return a, b, answers


async def test_kill_9_in_a_burst_on_the_real_cluster_then_a_same_id_restart(
    replicas: tuple[Replica, Replica], real_history: WatchedJobHistory, db: Database
) -> None:
    a, b, answers = await _started(replicas)
    names = [f"crash-{n}" for n in range(BURST)]
    burst = asyncio.create_task(submit_burst([a, b], answers, names, run_seconds=2.0))
    await wait_until(lambda: len(answers.accepted) >= BURST // 2, timeout=120)
    [(dead, held)] = (await incarnations(db, "replica-a")).items()
    a.kill()
    killed = time.monotonic()
    assert await a.wait_exit() == -signal.SIGKILL
    restart = asyncio.create_task(a.start())
    await wait_until(
        lambda: taken_over(db, held, dead), timeout=60, interval=0.05, message="takeover"
    )
    takeover = time.monotonic() - killed
    await restart
    await burst
    converged = await wait_converged(db, answers.accepted)

    await assert_invariants(db, real_history, answers.accepted)
    answers.assert_no_server_errors()
    await asyncio.gather(a.wait_ready(60), b.wait_ready(60))
    record(
        "real cluster: kill-9 + same-id restart",
        burst=BURST,
        held_at_kill=len(held),
        takeover_s=round(takeover, 2),
        lease_ttl_s=LEASE_TTL,
        converged_after_burst_s=round(converged, 2),
        job_events=len(real_history.changes),
    )
    assert takeover <= LEASE_TTL + 5.0, takeover  # as on kubesim: expiry, not a restart


async def test_a_replica_frozen_past_its_ttl_lands_no_stale_write_on_the_real_cluster(
    replicas: tuple[Replica, Replica], real_history: WatchedJobHistory, db: Database
) -> None:
    a, b, answers = await _started(replicas)
    names = [f"pause-{n}" for n in range(BURST)]
    await submit_burst([a], answers, names, run_seconds=1.0)  # all leased to a on create
    await wait_until(lambda: jobs_created(real_history, 3), timeout=60, interval=0.005)
    a.signal(signal.SIGSTOP)  # mid-step: Jobs are being created
    stopped = time.monotonic()
    owned = await incarnations(db, "replica-a")
    await wait_until(lambda: none_live(db, "replica-a"), timeout=30, interval=0.05)
    expired = time.monotonic() - stopped
    await wait_until(lambda: peer_holds_all_unfinished(db, "replica-b"), timeout=60)
    a.signal(signal.SIGCONT)
    converged = await wait_converged(db, answers.accepted)

    await assert_invariants(db, real_history, answers.accepted)
    answers.assert_no_server_errors()
    assert a.alive and b.alive
    await asyncio.gather(a.wait_ready(60), b.wait_ready(60))
    record(
        "real cluster: SIGSTOP past the TTL, then SIGCONT",
        burst=BURST,
        held_when_frozen=sum(len(v) for v in owned.values()),
        leases_expired_after_s=round(expired, 2),
        converged_after_resume_s=round(converged, 2),
        stale_steps_dropped=len(a.logged("dropping", run=1)),
        job_events=len(real_history.changes),
    )
