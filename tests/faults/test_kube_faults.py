"""The Kubernetes API misbehaving under two replicas: 500s, 429s, dropped watches, a forced
410, and a 10 s outage. Work converges with every invariant intact, and the logs stay quiet:
retried failures are one-line warnings, never ERRORs with tracebacks."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.faults.conftest import BURST, ReplicaFactory
from tests.faults.figures import record
from tests.faults.history import JobHistory
from tests.faults.processes import Kubesim
from tests.faults.workloads import (
    Answers,
    Careful,
    Database,
    assert_invariants,
    jobs_created,
    submit_burst,
    wait_converged,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(600)


async def test_a_burst_through_api_errors_throttling_watch_drops_a_410_and_an_outage(
    replica: ReplicaFactory, cluster: Kubesim, history: JobHistory, db: Database
) -> None:
    a, b = replica("replica-a"), replica("replica-b")
    await asyncio.gather(a.start(), b.start())
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    answers = Answers()
    await Careful([a, b], answers).setup_pool()

    # A quarter of the Jobs created through 500s, the next quarter through 429s (with watch
    # streams dropping every 25 events all along), then a forced 410 and a 10 s outage.
    await cluster.faults(error_rate=0.3, error_code=500, seed=7, watch_drop_after_events=25)
    names = [f"apifault-{n}" for n in range(BURST)]
    burst = asyncio.create_task(submit_burst([a, b], answers, names, run_seconds=1.0))
    await wait_until(lambda: jobs_created(history, BURST // 4), timeout=120, interval=0.05)
    await cluster.faults(error_code=429, retry_after_seconds=1)
    await wait_until(lambda: jobs_created(history, BURST // 2), timeout=120, interval=0.05)
    await cluster.faults(error_rate=0.0, shrink_watch_history=True)
    await cluster.faults(refuse_connections_seconds=10.0)
    outage_over = time.monotonic() + 10.0

    async def refusing() -> bool:
        return not await cluster.answering()

    # The restart begins just after that answer: "answering" must mean after the outage, not
    # before it began (a request in that gap is cut off by the restart).
    await wait_until(refusing, timeout=5, interval=0.02, message="apiserver down")
    await burst
    await wait_until(cluster.answering, timeout=30, interval=0.1, message="apiserver back")
    await cluster.clear_faults()
    converged = await wait_converged(db, answers.accepted)

    await assert_invariants(db, history, answers.accepted)
    answers.assert_no_server_errors()
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    errors = a.errors() + b.errors()
    assert errors == [], errors[:5]
    record(
        "Kubernetes faults (500s, 429s, watch drops, 410, 10 s outage)",
        burst=BURST,
        converged_after_outage_s=round(max(0.0, time.monotonic() - outage_over), 2),
        converged_s=round(converged, 2),
        warnings=len(a.warnings()) + len(b.warnings()),
        errors=len(errors),
    )
