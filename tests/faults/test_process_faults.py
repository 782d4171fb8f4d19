"""Replicas that crash, freeze or are told to stop, in the middle of a burst of submissions.

Two `python -m app serve` processes share one database and one kubesim. Whatever happens to
one of them, every accepted workload exists once and succeeds, with exactly one Job in the
cluster's own history, none re-suspended or given its finalizer back by a stale owner, and
exactly one `JobCreated` and one `EvidenceRecorded` each.
"""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from tests.faults.conftest import BURST, ReplicaFactory
from tests.faults.figures import record
from tests.faults.history import JobHistory
from tests.faults.workloads import (
    Answers,
    Database,
    assert_invariants,
    jobs_created,
    setup_pool,
    submit_burst,
    wait_converged,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(600)

LEASE_TTL = 3.0


async def _incarnations(db: Database, owner: str) -> dict[str, set[str]]:
    """Incarnation → the resources its live leases cover."""
    rows = await db.fetch(
        "SELECT incarnation, resource_id::text AS id FROM leases"
        " WHERE owner = $1 AND expires_at > now()",
        owner,
    )
    found: dict[str, set[str]] = {}
    for row in rows:
        found.setdefault(row["incarnation"], set()).add(row["id"])
    return found


async def _taken_over(db: Database, resources: set[str], dead: str) -> bool:
    """Every resource either finished or leased live by an incarnation other than `dead`."""
    rows = await db.fetch(
        "SELECT w.id::text AS id, w.state, l.incarnation, l.expires_at > now() AS live"
        " FROM workloads w LEFT JOIN leases l ON l.kind = 'workload' AND l.resource_id = w.id"
        " WHERE w.id::text = ANY($1::text[])",
        list(resources),
    )
    for row in rows:
        if row["state"] in ("SUCCEEDED", "FAILED"):
            continue
        if not row["live"] or row["incarnation"] == dead:
            return False
    return True


async def test_kill_9_in_a_burst_then_a_restart_under_the_same_id_loses_and_doubles_nothing(
    replica: ReplicaFactory, history: JobHistory, db: Database
) -> None:
    a, b = replica("replica-a", lease_ttl=LEASE_TTL), replica("replica-b", lease_ttl=LEASE_TTL)
    await asyncio.gather(a.start(), b.start())
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    answers = Answers()
    await setup_pool([a, b], answers)

    names = [f"crash-{n}" for n in range(BURST)]
    burst = asyncio.create_task(submit_burst([a, b], answers, names, run_seconds=3.0))
    await wait_until(lambda: len(answers.accepted) >= BURST // 2, timeout=120)
    before = await _incarnations(db, "replica-a")
    [(dead, held)] = before.items()
    a.kill()
    killed = time.monotonic()
    assert await a.wait_exit() == -signal.SIGKILL
    # The same instance id, as a container restart in the same pod; the takeover is timed
    # while it starts.
    restart = asyncio.create_task(a.start())
    await wait_until(
        lambda: _taken_over(db, held, dead), timeout=30, interval=0.05, message="takeover"
    )
    takeover = time.monotonic() - killed
    await restart
    restarted = time.monotonic() - killed
    await burst
    converged = await wait_converged(db, answers.accepted)

    await assert_invariants(db, history, answers.accepted)
    answers.assert_no_server_errors()
    # The target is TTL + 1 s and the figure is recorded (docs/RELIABILITY.md); asserted here
    # only within what tells a takeover by expiry from one that waits for a restart or resync,
    # since a small shared machine adds the time the saturated peer needs to claim the leases.
    assert takeover <= LEASE_TTL + 5.0, takeover
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    record(
        "kill-9 + same-id restart",
        burst=BURST,
        held_at_kill=len(held),
        restart_s=round(restarted, 2),
        takeover_s=round(takeover, 2),
        lease_ttl_s=LEASE_TTL,
        converged_after_burst_s=round(converged, 2),
        lost_answers=answers.lost,
    )


async def test_a_replica_frozen_past_its_lease_ttl_lands_no_stale_kubernetes_write(
    replica: ReplicaFactory, history: JobHistory, db: Database
) -> None:
    """SIGSTOP in the middle of creating Jobs, held past the TTL while the peer takes over,
    then SIGCONT: the resumed replica's pending steps must not touch the peer's Jobs."""
    a, b = replica("replica-a", lease_ttl=LEASE_TTL), replica("replica-b", lease_ttl=LEASE_TTL)
    await asyncio.gather(a.start(), b.start())
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    answers = Answers()
    await setup_pool([a, b], answers)

    names = [f"pause-{n}" for n in range(BURST)]
    await submit_burst([a], answers, names, run_seconds=1.0)  # all leased to a on create
    await wait_until(lambda: jobs_created(history, 3), timeout=30, interval=0.005)
    a.signal(signal.SIGSTOP)  # mid-step: Jobs are being created
    stopped = time.monotonic()
    owned = await _incarnations(db, "replica-a")
    # Frozen until its leases have expired and the peer holds everything unfinished.
    await wait_until(lambda: _none_live(db, "replica-a"), timeout=30, interval=0.05)
    expired = time.monotonic() - stopped
    await wait_until(lambda: _peer_holds_all_unfinished(db, "replica-b"), timeout=30, interval=0.05)
    frozen_for = time.monotonic() - stopped
    a.signal(signal.SIGCONT)
    converged = await wait_converged(db, answers.accepted)

    await assert_invariants(db, history, answers.accepted)
    answers.assert_no_server_errors()
    assert a.alive and b.alive
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    record(
        "SIGSTOP past the TTL, then SIGCONT",
        burst=BURST,
        held_when_frozen=sum(len(v) for v in owned.values()),
        leases_expired_after_s=round(expired, 2),
        frozen_s=round(frozen_for, 2),
        converged_after_resume_s=round(converged, 2),
        stale_steps_dropped=len(a.logged("dropping", run=1)),
    )


async def _none_live(db: Database, owner: str) -> bool:
    return await db.held_by(owner) == 0


@pytest.mark.full_only
async def test_sigterm_hands_every_lease_to_the_peer_at_once(
    replica: ReplicaFactory, history: JobHistory, db: Database
) -> None:
    a, b = replica("replica-a", lease_ttl=15.0), replica("replica-b", lease_ttl=15.0)
    await asyncio.gather(a.start(), b.start())
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    answers = Answers()
    await setup_pool([a, b], answers)
    names = [f"handoff-{n}" for n in range(min(BURST, 30))]
    await submit_burst([a], answers, names, run_seconds=4.0)
    await wait_until(lambda: jobs_created(history, len(names)), timeout=60, interval=0.1)
    held = await db.held_by("replica-a")

    a.signal(signal.SIGTERM)
    sent = time.monotonic()
    await wait_until(lambda: _none_live(db, "replica-a"), timeout=30, interval=0.02)
    released = time.monotonic() - sent
    await wait_until(lambda: _peer_holds_all_unfinished(db, "replica-b"), timeout=30, interval=0.02)
    handoff = time.monotonic() - sent
    assert await a.wait_exit() == 0
    converged = await wait_converged(db, answers.accepted)

    await assert_invariants(db, history, answers.accepted)
    answers.assert_no_server_errors()
    assert handoff < 5.0, handoff  # far below the 15 s TTL a crash would cost
    record(
        "SIGTERM hand-off",
        workloads=len(names),
        held_at_sigterm=held,
        released_s=round(released, 2),
        handoff_s=round(handoff, 2),
        lease_ttl_s=15.0,
        converged_s=round(converged, 2),
    )


async def _peer_holds_all_unfinished(db: Database, peer: str) -> bool:
    rows = await db.fetch(
        "SELECT count(*) AS n FROM workloads w"
        " WHERE w.state NOT IN ('SUCCEEDED', 'FAILED') AND NOT EXISTS ("
        "  SELECT 1 FROM leases l WHERE l.kind = 'workload' AND l.resource_id = w.id"
        "  AND l.owner = $1 AND l.expires_at > now())",
        peer,
    )
    return int(rows[0]["n"]) == 0
