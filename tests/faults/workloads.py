"""What the fault scenarios do through the API, and the invariants they check afterwards.

Submissions behave like a careful client: each carries an `Idempotency-Key`, a 503 is retried
after its `Retry-After`, and a request whose answer was lost (the replica died mid-request) is
sent again — to any replica — with the same key, so it is accepted exactly once. Every answer
is kept: a scenario asserts there was no 500 among them.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx

from tests.faults.history import JobHistory
from tests.faults.processes import Replica
from tests.support.scenario import Scenario
from tests.support.waiting import wait_until

PROJECT = "faults"
POOL = "gpus"
WORKLOADS = f"/api/v1/projects/{PROJECT}/workloads"
PROBLEM = "application/problem+json"
#: A fault scenario's workloads: one GPU each, done after half a second.
DEFAULTS: dict[str, Any] = {
    "accelerators": 1,
    "cpu": "1",
    "memory": "1Gi",
    "env": {"KUBESIM_RUN_SECONDS": "0.5"},
}


@dataclass
class Answers:
    """Every HTTP status the scenario's requests got, and the names accepted (202)."""

    statuses: Counter[int] = field(default_factory=Counter)
    accepted: set[str] = field(default_factory=set)
    lost: int = 0  # requests without an answer (connection reset by a dying replica)
    unavailable_without_retry_after: int = 0

    def note(self, response: httpx.Response) -> None:
        self.statuses[response.status_code] += 1
        if response.status_code == 503 and "retry-after" not in response.headers:
            self.unavailable_without_retry_after += 1

    def assert_no_server_errors(self) -> None:
        assert self.statuses[500] == 0, f"500s among the answers: {dict(self.statuses)}"
        assert not {s for s in self.statuses if s >= 500 and s != 503}, dict(self.statuses)
        assert self.unavailable_without_retry_after == 0


async def request(
    replicas: list[Replica],
    answers: Answers,
    method: str,
    path: str,
    *,
    json: Any = None,
    params: dict[str, Any] | None = None,
    key: str | None = None,
    accept: tuple[int, ...] = (200, 202, 204),
    deadline: float = 120.0,
) -> httpx.Response:
    """Send until a replica gives an answer in `accept`: 503 (after `Retry-After`) and lost
    answers go to the next live replica; anything else fails the scenario."""
    headers = {"Idempotency-Key": key} if key else {}
    give_up = time.monotonic() + deadline
    for replica in itertools.cycle(replicas):
        if time.monotonic() > give_up:
            raise AssertionError(f"{method} {path}: no acceptable answer in {deadline}s")
        if not replica.alive or not replica.url:
            await asyncio.sleep(0.05)
            continue
        try:
            response = await replica.http.request(
                method, path, json=json, params=params, headers=headers
            )
        except httpx.HTTPError:
            answers.lost += 1
            await asyncio.sleep(0.05)
            continue
        answers.note(response)
        if response.status_code in accept:
            return response
        if response.status_code == 503:
            await asyncio.sleep(min(float(response.headers.get("retry-after", "1")), 1.0))
            continue
        raise AssertionError(f"{method} {path}: {response.status_code} {response.text}")
    raise AssertionError("unreachable")


class Careful(Scenario):
    """The scenario API (tests/support/scenario.py) for the project `faults` and its pool
    `gpus` (32 GPUs unless told otherwise; 1-GPU workloads), sent by `request` to `replicas`
    as a careful client does; a create without a key of its own carries one made of its path
    and name."""

    def __init__(self, replicas: list[Replica], answers: Answers) -> None:
        super().__init__(
            None,
            project=PROJECT,
            pool=POOL,
            accelerators=32,
            defaults=DEFAULTS,
            wait_timeout=30,
            interval=0.1,
        )
        self.replicas = replicas
        self.answers = answers

    async def request(self, method: str, path: str, **options: Any) -> httpx.Response:
        body = options.get("json")
        if not options.get("key") and method == "POST" and isinstance(body, dict):
            options["key"] = f"{path}/{body['name']}"
        return await request(self.replicas, self.answers, method, path, **options)

    def quota(self, accelerators: int) -> dict[str, Any]:
        return {"accelerators": accelerators, "cpu": str(max(512, accelerators)), "memory": "4Ti"}


async def submit_burst(
    replicas: list[Replica],
    answers: Answers,
    names: list[str],
    *,
    concurrency: int = 16,
    run_seconds: float = 0.5,
) -> None:
    """Submit every name (each exactly once, whatever happens to the replicas meanwhile)."""
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int, name: str) -> None:
        # Spread the burst over the replicas; retries move on to the next ones.
        order = replicas[index % len(replicas) :] + replicas[: index % len(replicas)]
        async with gate:
            await Careful(order, answers).submit(
                name, key=name, env={"KUBESIM_RUN_SECONDS": str(run_seconds)}
            )
        answers.accepted.add(name)

    await asyncio.gather(*(one(i, name) for i, name in enumerate(names)))


#: How the test's own database session is named (scenarios that terminate backends skip it).
OBSERVER = "aicp fault test"
_GONE = (
    OSError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError,
)


class Database:
    """Direct reads of what aicp stored, for the invariants, over one session of its own."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: asyncpg.Connection[Any] | None = None
        self._lock = asyncio.Lock()

    async def fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        async with self._lock:
            for attempt in range(3):
                try:
                    if self._conn is None or self._conn.is_closed():
                        self._conn = await asyncpg.connect(
                            self.url, server_settings={"application_name": OBSERVER}
                        )
                    return list(await self._conn.fetch(query, *args))
                except _GONE:
                    self._conn = None
                    if attempt == 2:
                        raise
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()

    async def states(self) -> dict[str, str]:
        rows = await self.fetch("SELECT name, state FROM workloads")
        return {r["name"]: r["state"] for r in rows}

    async def ids(self) -> dict[str, str]:
        rows = await self.fetch("SELECT name, id::text AS id FROM workloads")
        return {r["name"]: r["id"] for r in rows}

    async def event_counts(self, type_: str) -> dict[str, int]:
        """Workload name → how many events of `type_` it has."""
        rows = await self.fetch(
            "SELECT resource_name, count(*) AS n FROM events"
            " WHERE kind = 'workload' AND type = $1 GROUP BY resource_name",
            type_,
        )
        return {r["resource_name"]: int(r["n"]) for r in rows}

    async def lease_owners(self) -> Counter[str]:
        rows = await self.fetch(
            "SELECT owner || '#' || incarnation AS who FROM leases"
            " WHERE kind = 'workload' AND expires_at > now()"
        )
        return Counter(r["who"] for r in rows)

    async def held_by(self, owner: str, incarnation: str | None = None) -> int:
        rows = await self.fetch(
            "SELECT count(*) AS n FROM leases WHERE owner = $1 AND expires_at > now()"
            " AND ($2::text IS NULL OR incarnation = $2)",
            owner,
            incarnation,
        )
        return int(rows[0]["n"])


async def jobs_created(history: JobHistory, count: int) -> bool:
    """True once the cluster's history holds at least `count` Job creations."""
    await history.refresh()
    return history.created() >= count


async def wait_converged(
    db: Database, names: set[str], *, final: str = "SUCCEEDED", timeout: float = 300.0
) -> float:
    """Wait until every named workload is in `final`; return how long it took."""
    started = time.monotonic()

    async def done() -> bool:
        states = await db.states()
        return all(states.get(n) == final for n in names)

    await wait_until(done, timeout=timeout, interval=0.25, message=f"every workload {final}")
    return time.monotonic() - started


async def assert_invariants(
    db: Database, history: JobHistory, names: set[str], *, final: str = "SUCCEEDED"
) -> None:
    """Everything accepted exists once in its final state, with exactly one Job in the
    cluster's own history, no Job re-suspended or given its finalizer back, and exactly one
    `JobCreated` and one `EvidenceRecorded` each."""
    await history.refresh()
    states = await db.states()
    assert set(states) >= names, f"accepted but missing: {sorted(names - set(states))[:10]}"
    wrong = {n: states[n] for n in names if states[n] != final}
    assert not wrong, f"not {final}: {dict(list(wrong.items())[:10])}"
    ids = await db.ids()
    jobs = history.by_workload()
    counts = {n: len(jobs.get(ids[n], ())) for n in names}
    assert all(c == 1 for c in counts.values()), {n: c for n, c in counts.items() if c != 1}
    assert history.resuspended() == []
    assert history.finalizer_returned() == []
    for type_ in ("JobCreated", "EvidenceRecorded"):
        found = await db.event_counts(type_)
        off = {n: found.get(n, 0) for n in names if found.get(n, 0) != 1}
        assert not off, f"{type_} not exactly once: {dict(list(off.items())[:10])}"
