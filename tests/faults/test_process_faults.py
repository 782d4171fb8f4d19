"""Replicas that crash, freeze or are told to stop, in the middle of a burst of submissions.

Two `python -m app serve` processes share one database and one kubesim. Whatever happens to
one of them, every accepted workload exists once and succeeds, with exactly one Job in the
cluster's own history, none re-suspended or given its finalizer back by a stale owner, and
exactly one `JobCreated` and one `EvidenceRecorded` each.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from datetime import datetime
from typing import Any

import pytest

from tests.faults.conftest import BURST, ReplicaFactory
from tests.faults.figures import record
from tests.faults.history import JobHistory
from tests.faults.leases import (
    incarnations,
    lease_expiries,
    none_live,
    not_taken_over,
    peer_holds_all_unfinished,
)
from tests.faults.processes import Replica
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

LEASE_TTL = 3.0
TAKEOVER_SLACK = 5.0  # see the assertions
#: Submissions leased to the replica killed in the 1,000-lease takeover: every one runs at
#: once (as many GPUs) for 20 s, so all are held when it dies, and a few spare.
THOUSAND = 1050


async def _kill_9_and_restart(
    replica: ReplicaFactory,
    history: JobHistory,
    db: Database,
    *,
    burst: int,
    scenario: str,
    through_both: bool,
    accelerators: int = 32,
    run_seconds: float = 3.0,
) -> float:
    """kill -9 one of two replicas in a burst, restart it under the same id, and time the
    takeover of what it held; return the takeover time. With `through_both`, the burst goes to
    both replicas and the kill comes halfway through it; otherwise every submission goes to
    the one killed (so it holds all of them) and the kill comes once all are accepted."""
    a, b = replica("replica-a", lease_ttl=LEASE_TTL), replica("replica-b", lease_ttl=LEASE_TTL)
    await asyncio.gather(a.start(), b.start())
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    answers = Answers()
    await Careful([a, b], answers).setup_pool(accelerators)

    names = [f"crash-{n}" for n in range(burst)]
    targets = [a, b] if through_both else [a]
    started = time.monotonic()
    burst_task = asyncio.create_task(submit_burst(targets, answers, names, run_seconds=run_seconds))
    if through_both:
        await wait_until(lambda: len(answers.accepted) >= burst // 2, timeout=120)
    else:
        await burst_task
    submitted = time.monotonic() - started
    before = await incarnations(db, "replica-a")
    [(dead, held)] = before.items()
    a.kill()
    killed, wall_killed = time.monotonic(), time.time()
    expiries = await lease_expiries(db, "replica-a")  # the dead process renews nothing more
    probed = time.monotonic() - killed
    assert await a.wait_exit() == -signal.SIGKILL
    # The same instance id, as a container restart in the same pod; the takeover is timed
    # while it starts.
    restart = asyncio.create_task(a.start())
    # How many are left to take over, polled until none: the timeline of the takeover.
    timeline: list[tuple[float, int]] = []

    async def done() -> bool:
        left = await not_taken_over(db, held, dead)
        timeline.append((time.monotonic() - killed, left))
        return left == 0

    await wait_until(done, timeout=60, interval=0.02, message="takeover")
    takeover = timeline[-1][0]
    await restart
    restarted = time.monotonic() - killed
    await burst_task
    converged = await wait_converged(db, answers.accepted, timeout=600)

    await assert_invariants(db, history, answers.accepted)
    answers.assert_no_server_errors()
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    at_target = next((n for t, n in timeline if t >= LEASE_TTL + 1.0), 0)
    record(
        scenario,
        burst=burst,
        submitted_s=round(submitted, 2),
        held_at_kill=len(held),
        restart_s=round(restarted, 2),
        takeover_s=round(takeover, 2),
        lease_ttl_s=LEASE_TTL,
        last_expiry_s=round(probed + max(expiries.values(), default=0.0), 2),
        first_taken_s=round(next((t for t, n in timeline if n < len(held)), 0.0), 2),
        left_at_ttl_plus_1s=at_target,
        # The peer's sweeps that claimed leases after the kill: seconds after it, leases,
        # statement time (ms), how late the sweep task ran (ms: the event loop's lag).
        peer_sweeps=json.dumps(_sweeps_after(b, wall_killed, takeover + 0.5)),
        # When the restarted process expired its predecessor's leases (seconds after the kill).
        restart_released_s=json.dumps(
            [round(_at(line) - wall_killed, 2) for line in a.logged("left by an earlier run")]
        ),
        converged_after_burst_s=round(converged, 2),
        lost_answers=answers.lost,
    )
    return takeover


def _at(line: dict[str, Any]) -> float:
    """A log line's time (epoch seconds)."""
    return datetime.fromisoformat(str(line["ts"]).replace("Z", "+00:00")).timestamp()


def _sweeps_after(replica: Replica, since: float, until: float) -> list[list[float]]:
    """[seconds after `since`, leases, statement ms, lateness ms] of each sweep that claimed
    leases from `since` to `until` seconds after it."""
    found = []
    for line in replica.logged("sweep claimed"):
        if 0 <= (at := _at(line)) - since <= until:
            words = str(line["msg"]).split()
            found.append([round(at - since, 2), int(words[2]), float(words[7]), float(words[11])])
    return found


async def test_kill_9_in_a_burst_then_a_restart_under_the_same_id_loses_and_doubles_nothing(
    replica: ReplicaFactory, history: JobHistory, db: Database
) -> None:
    takeover = await _kill_9_and_restart(
        replica,
        history,
        db,
        burst=BURST,
        scenario="kill-9 + same-id restart",
        through_both=True,
    )
    # The target is TTL + 1 s and the figure is recorded against it (docs/RELIABILITY.md); the
    # assertion is the bound that tells a takeover at the leases' expiry from one that waits
    # for a restart or a resync, since a loaded shared machine adds the peer's event-loop lag.
    assert takeover <= LEASE_TTL + TAKEOVER_SLACK, takeover


@pytest.mark.full_only
@pytest.mark.timeout(900)
@pytest.mark.kubesim(nodes=36, gpus_per_node=32)  # every workload runs at once
async def test_a_dead_replicas_thousand_leases_are_taken_over_within_the_ttl_and_a_second(
    replica: ReplicaFactory, history: JobHistory, db: Database
) -> None:
    takeover = await _kill_9_and_restart(
        replica,
        history,
        db,
        burst=THOUSAND,
        scenario="kill-9 of a replica holding 1,000 leases + same-id restart",
        through_both=False,
        accelerators=THOUSAND,
        run_seconds=20.0,
    )
    # The target is TTL + 1 s and the figure is recorded against it (docs/RELIABILITY.md); the
    # assertion is the bound that tells a takeover at the leases' expiry from one that waits
    # for a restart or a resync, since a loaded shared machine adds the peer's event-loop lag.
    assert takeover <= LEASE_TTL + TAKEOVER_SLACK, takeover


async def test_a_replica_frozen_past_its_lease_ttl_lands_no_stale_kubernetes_write(
    replica: ReplicaFactory, history: JobHistory, db: Database
) -> None:
    """SIGSTOP in the middle of creating Jobs, held past the TTL while the peer takes over,
    then SIGCONT: the resumed replica's pending steps must not touch the peer's Jobs."""
    a, b = replica("replica-a", lease_ttl=LEASE_TTL), replica("replica-b", lease_ttl=LEASE_TTL)
    await asyncio.gather(a.start(), b.start())
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    answers = Answers()
    await Careful([a, b], answers).setup_pool()

    names = [f"pause-{n}" for n in range(BURST)]
    await submit_burst([a], answers, names, run_seconds=1.0)  # all leased to a on create
    await wait_until(lambda: jobs_created(history, 3), timeout=30, interval=0.005)
    a.signal(signal.SIGSTOP)  # mid-step: Jobs are being created
    stopped = time.monotonic()
    owned = await incarnations(db, "replica-a")
    # Frozen until its leases have expired and the peer holds everything unfinished.
    await wait_until(lambda: none_live(db, "replica-a"), timeout=30, interval=0.05)
    expired = time.monotonic() - stopped
    await wait_until(lambda: peer_holds_all_unfinished(db, "replica-b"), timeout=30, interval=0.05)
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


@pytest.mark.full_only
async def test_sigterm_hands_every_lease_to_the_peer_at_once(
    replica: ReplicaFactory, history: JobHistory, db: Database
) -> None:
    a, b = replica("replica-a", lease_ttl=15.0), replica("replica-b", lease_ttl=15.0)
    await asyncio.gather(a.start(), b.start())
    await asyncio.gather(a.wait_ready(), b.wait_ready())
    answers = Answers()
    await Careful([a, b], answers).setup_pool()
    names = [f"handoff-{n}" for n in range(min(BURST, 30))]
    await submit_burst([a], answers, names, run_seconds=4.0)
    await wait_until(lambda: jobs_created(history, len(names)), timeout=60, interval=0.1)
    held = await db.held_by("replica-a")

    a.signal(signal.SIGTERM)
    sent = time.monotonic()
    await wait_until(lambda: none_live(db, "replica-a"), timeout=30, interval=0.02)
    released = time.monotonic() - sent
    await wait_until(lambda: peer_holds_all_unfinished(db, "replica-b"), timeout=30, interval=0.02)
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
