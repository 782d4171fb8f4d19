"""PostgreSQL going away under running replicas: backends terminated (one at a time and in
storms), connections refused at start-up and at run time, and the doorbell's LISTEN
connection cut again and again right after it reconnects.

Nothing is lost or doubled; the API answers 503 with `Retry-After` while the database is
gone, never 500; every engine survives (each replica is ready again afterwards, none stays
up with a dead engine); a delete accepted while the owner's listener was down is acted on
within 2 s of it listening again.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.faults.conftest import BURST, ReplicaFactory
from tests.faults.figures import p50, record
from tests.faults.history import JobHistory
from tests.faults.processes import PgProxy, Replica
from tests.faults.workloads import (
    OBSERVER,
    WORKLOADS,
    Answers,
    Careful,
    Database,
    assert_invariants,
    request,
    submit_burst,
    wait_converged,
)
from tests.support.pg_fixtures import connected
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(600)


ONE = "ORDER BY random() LIMIT 1"


def _victims(where: str, then: str = "") -> str:
    return (
        "WITH victims AS MATERIALIZED (SELECT pid FROM pg_stat_activity"
        f" WHERE datname = current_database() AND pid <> pg_backend_pid()"
        f" AND application_name <> '{OBSERVER}' AND {where} {then})"
        " SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS n FROM victims"
    )


async def _storm(
    db: Database, where: str, *, seconds: float, every: float, then: str = ""
) -> tuple[int, float]:
    """pg_terminate_backend on the test database's backends matching `where` (`then`: e.g.
    `ONE`, a random one of them) every `every` seconds for `seconds`, from one connection of
    its own; return how many were terminated, and when the last one went."""
    killed, last = 0, 0.0
    until = time.monotonic() + seconds
    async with connected(db.url) as conn:
        while time.monotonic() < until:
            now = int(await conn.fetchval(_victims(where, then)))
            if now:
                killed, last = killed + now, time.monotonic()
            await asyncio.sleep(every)
    return killed, last


async def _start_pair(replica: ReplicaFactory, **options: float) -> tuple[Replica, Replica]:
    a, b = replica("replica-a", **options), replica("replica-b", **options)
    await asyncio.gather(a.start(), b.start())
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    return a, b


@pytest.mark.full_only
async def test_backends_terminated_repeatedly_and_in_storms_during_a_burst(
    replica: ReplicaFactory, history: JobHistory, db: Database
) -> None:
    a, b = await _start_pair(replica)
    answers = Answers()
    await Careful([a, b], answers).setup_pool()
    names = [f"kill-{n}" for n in range(BURST)]
    burst = asyncio.create_task(submit_burst([a, b], answers, names, run_seconds=1.0))
    # One backend at a time, then every backend of the database at once, repeatedly.
    single, _ = await _storm(db, "true", seconds=3.0, every=0.1, then=ONE)
    storm, _ = await _storm(db, "true", seconds=3.0, every=0.25)
    storm_over = time.monotonic()
    await burst
    converged = await wait_converged(db, answers.accepted)

    await assert_invariants(db, history, answers.accepted)
    answers.assert_no_server_errors()
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    assert a.alive and b.alive
    record(
        "backends terminated (single, then storms)",
        burst=BURST,
        terminated_one_by_one=single,
        terminated_in_storms=storm,
        answers_503=answers.statuses[503],
        converged_after_storm_s=round(time.monotonic() - storm_over, 2),
        converged_s=round(converged, 2),
    )


async def test_connections_refused_at_start_up_and_at_run_time(
    replica: ReplicaFactory, proxy: PgProxy, history: JobHistory, db: Database
) -> None:
    """Replica a reaches PostgreSQL only through the proxy; b directly."""
    await proxy.refuse()
    a = replica("replica-a", url=proxy.url_for(db.url))
    b = replica("replica-b")
    starting = asyncio.create_task(a.start())
    await b.start()
    await wait_until(
        lambda: a.logged("cannot connect to the database"), timeout=30, message="a waits"
    )
    await proxy.start()  # the database "comes back" while a is starting
    opened = time.monotonic()
    await starting
    await a.wait_ready(timeout=60)
    ready_after_refusal = time.monotonic() - opened
    answers = Answers()
    await Careful([a, b], answers).setup_pool()

    names = [f"refused-{n}" for n in range(max(BURST // 2, 20))]
    half = len(names) // 2
    await submit_burst([a], answers, names[:half], run_seconds=1.0)
    await proxy.refuse()  # at run time: a's pool and listener lose the database
    refused_at = time.monotonic()
    during = Answers()
    async with a.client(timeout=10) as client:
        for name in names[half:]:
            response = await client.post(
                WORKLOADS, json=Careful([a], during).workload_body(name), timeout=10
            )
            during.note(response)
            assert response.status_code == 503, response.text
            assert response.headers["content-type"].startswith("application/problem+json")
            assert int(response.headers["retry-after"]) >= 1
    while time.monotonic() - refused_at < 5.0:  # the outage lasts 5 s
        status = await a.status("/readyz")
        assert status in (503, 200), status
        await asyncio.sleep(0.25)
    await proxy.start()
    back = time.monotonic()
    await a.wait_ready(timeout=30)
    ready_after_outage = time.monotonic() - back
    await submit_burst([a, b], answers, names[half:], run_seconds=1.0)
    converged = await wait_converged(db, answers.accepted)

    await assert_invariants(db, history, answers.accepted)
    answers.assert_no_server_errors()
    during.assert_no_server_errors()
    assert a.alive and b.alive
    record(
        "connections refused (start-up, then 5 s at run time)",
        ready_after_startup_refusal_s=round(ready_after_refusal, 2),
        answers_503_during_outage=during.statuses[503],
        ready_after_outage_s=round(ready_after_outage, 2),
        converged_s=round(converged, 2),
    )


async def _running_on_a(
    replica: ReplicaFactory, db: Database, count: int, **options: float | str
) -> tuple[Replica, Replica, Answers, list[str], dict[str, str]]:
    """Replicas a and b; `count` long-running workloads, all leased to a (accepted by it)."""
    url = options.pop("url", None)
    a = replica("replica-a", url=url, lease_ttl=15.0)  # type: ignore[arg-type]
    b = replica("replica-b", lease_ttl=15.0)
    await asyncio.gather(a.start(), b.start())
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    answers = Answers()
    await Careful([a, b], answers).setup_pool()
    names = [f"held-{n}" for n in range(count)]
    await submit_burst([a], answers, names, run_seconds=600.0)
    ids = await db.ids()

    async def all_running() -> bool:
        states = await db.states()
        return all(states.get(n) == "RUNNING" for n in names)

    await wait_until(all_running, timeout=60, interval=0.1, message="all RUNNING")
    return a, b, answers, names, ids


async def _deleting_times(history: JobHistory, ids: dict[str, str], names: list[str]) -> bool:
    await history.refresh()
    seen = history.first_deleting()
    return all(ids[n] in seen for n in names)


async def test_a_delete_accepted_during_a_listen_gap_is_acted_on_soon_after_reconnection(
    replica: ReplicaFactory, proxy: PgProxy, history: JobHistory, db: Database
) -> None:
    """a (through the proxy) holds running workloads and loses the database for 7 s, less
    than its lease TTL: its leases stay live, so b — which accepts their deletion meanwhile —
    cannot act, and a never hears the doorbells. a must replay what it holds when it listens
    again, instead of waiting for an informer event or the 5-minute resync."""
    a, b, answers, names, ids = await _running_on_a(
        replica, db, min(BURST, 20), url=proxy.url_for(db.url)
    )
    await proxy.refuse()
    gap_started = time.monotonic()
    for name in names:
        await request([b], answers, "DELETE", f"{WORKLOADS}/{name}", accept=(202,))
    while time.monotonic() - gap_started < 7.0:  # the gap: 7 s without the database
        assert await db.held_by("replica-a") >= len(names)  # a's leases stay live
        await asyncio.sleep(0.25)
    await proxy.start()
    reopened = time.monotonic()
    await wait_until(
        lambda: a.logged("doorbell listening")[-1]["seen"] > reopened,
        timeout=10,
        interval=0.01,
        message="a listening again",
    )
    relistened = a.logged("doorbell listening")[-1]["seen"]
    await wait_until(
        lambda: _deleting_times(history, ids, names), timeout=30, interval=0.02, message="acted"
    )
    seen = history.first_deleting()
    lags = [seen[ids[n]] - relistened for n in names]
    await wait_until(lambda: _all_gone(db, names), timeout=60, interval=0.1)

    assert min(seen[ids[n]] for n in names) > reopened  # nothing was acted on in the gap
    # The figure (target 2 s) is recorded, not asserted tightly on a shared machine; without the
    # replay the deletes waited for the next informer event or the 5-minute resync.
    assert max(lags) <= 10.0, lags
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    await history.refresh()
    assert history.resuspended() == [] and history.finalizer_returned() == []
    answers.assert_no_server_errors()
    found = await db.event_counts("EvidenceRecorded")
    assert all(found.get(n) == 1 for n in names), found
    record(
        "delete during a 7 s LISTEN gap",
        workloads=len(names),
        relisten_after_reopen_s=round(relistened - reopened, 3),
        act_after_relisten_p50_s=p50(lags),
        act_after_relisten_max_s=round(max(lags), 3),
    )


@pytest.mark.full_only
async def test_the_listener_cut_again_right_after_each_reconnect_never_stops_the_engine(
    replica: ReplicaFactory, history: JobHistory, db: Database
) -> None:
    """a's LISTEN backend is terminated every 20 ms for 4 s — every reconnection is cut again
    at once, at whatever step of LISTEN it was — while b accepts deletions of a's workloads.
    a's engine lives through it, and every deletion is acted on."""
    a, b, answers, names, ids = await _running_on_a(replica, db, min(BURST, 20))
    listener = "application_name = 'aicp listener replica-a'"
    storm = asyncio.create_task(_storm(db, listener, seconds=4.0, every=0.02))
    await wait_until(lambda: _no_listener(db, listener), timeout=5, interval=0.005)
    for name in names:
        await request([b], answers, "DELETE", f"{WORKLOADS}/{name}", accept=(202,))
    cuts, _ = await storm
    storm_over = time.monotonic()
    await wait_until(
        lambda: _deleting_times(history, ids, names), timeout=30, interval=0.02, message="acted"
    )
    seen = history.first_deleting()
    await wait_until(lambda: _all_gone(db, names), timeout=60, interval=0.1)

    assert cuts >= 5, cuts
    assert max(seen[ids[n]] for n in names) - storm_over <= 10.0  # not the 5-minute resync
    assert a.alive and b.alive
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    assert a.errors() == [], a.errors()[:3]
    answers.assert_no_server_errors()
    record(
        "listener cut again right after each reconnect",
        listener_cuts=cuts,
        reconnections=len(a.logged("doorbell listening")) - 1,
        acted_after_storm_max_s=round(max(0.0, max(seen[ids[n]] for n in names) - storm_over), 3),
    )


@pytest.mark.full_only
async def test_a_database_outage_past_the_recovery_bound_ends_the_process_non_zero(
    replica: ReplicaFactory, proxy: PgProxy, db: Database
) -> None:
    """With the process supervisor: a replica whose doorbell cannot reconnect within
    AICP_RECOVERY_TIMEOUT_SECONDS exits with a non-zero status (the chart's probes and the
    kubelet restart it) rather than living on with an engine that does nothing; until then its
    `/healthz` never answers 200 once the engine is dead."""
    a = replica("replica-a", url=proxy.url_for(db.url), env={"AICP_RECOVERY_TIMEOUT_SECONDS": "3"})
    await a.start()
    await a.wait_ready()
    await proxy.refuse()
    refused = time.monotonic()
    health: list[int | None] = []
    while a.alive and time.monotonic() - refused < 30:
        health.append(await a.status("/healthz"))
        await asyncio.sleep(0.1)
    code = await a.wait_exit(timeout=30)
    exited = time.monotonic() - refused

    assert code not in (0, None), code
    assert exited < 15.0, exited
    assert a.logged("recover") or a.errors(), a.lines[-5:]
    record(
        "database outage past the recovery bound", exit_code=code, exited_after_s=round(exited, 2)
    )


async def _no_listener(db: Database, where: str) -> bool:
    rows = await db.fetch(
        f"SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND {where}"
    )
    return int(rows[0]["n"]) == 0


async def _all_gone(db: Database, names: list[str]) -> bool:
    states = await db.states()
    return not any(n in states for n in names)
