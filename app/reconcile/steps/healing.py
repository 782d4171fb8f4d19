"""What the cluster lost while the database remembered it, found once the informers have listed.

A cluster can lose what aicp made without an event saying so: an API server (or dev mode's
embedded kubesim) that starts empty under a database that remembers every project, pool and
workload; a namespace deleted while no replica ran. Informers report what they list, never
what is absent, and settled projects and pools are not swept. So, once every first list is in
the caches and the engine runs, `heal_after_sync` compares the live rows with the caches and
wakes each resource whose objects are missing — the steps then repair them as drift:

| row                                | missing from the caches | repaired by                     |
|------------------------------------|-------------------------|---------------------------------|
| project, namespace applied         | its namespace           | the project step (re-created)   |
| pool                               | its ClusterQueue, or    | the pool step (queues restored) |
|                                    | its project's namespace |                                 |
| workload QUEUED, ADMITTED, RUNNING | its Job                 | the workload step: PENDING, and |
|                                    |                         | a new attempt (`drift.job_lost`)|

It returns what it found (`Healed`), which the log and dev mode's banner report, once the
workloads it woke no longer claim the Jobs that are gone (or after `SETTLE_LIMIT_SECONDS`):
until then `/readyz` answers 503, so a ready replica never reports a workload QUEUED, ADMITTED
or RUNNING on a Job the cluster does not have.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.domain.naming import cluster_queue_name, namespace_for
from app.store import reconciling

if TYPE_CHECKING:
    import uuid

    from app.reconcile.engine import Reconciler
    from app.reconcile.steps.context import StepContext

log = logging.getLogger("aicp.reconcile")

#: How long the heal waits for the workloads it woke to leave the Jobs that are gone.
SETTLE_LIMIT_SECONDS = 30.0
#: How often it looks meanwhile.
SETTLE_POLL_SECONDS = 0.2


@dataclass(frozen=True, slots=True)
class Healed:
    """What the first lists lacked of what the database remembers (names, for people)."""

    projects: list[str] = field(default_factory=list)  # projects whose namespace was missing
    pools: list[str] = field(default_factory=list)  # project/pool whose queues were missing
    workloads: list[str] = field(default_factory=list)  # "project/name (STATE)", Job missing

    def __bool__(self) -> bool:
        return bool(self.projects or self.pools or self.workloads)

    def sentence(self) -> str:
        """One sentence saying what is being re-created."""
        parts = [
            f"{_count(self.projects, 'project')} namespace"
            f"{'' if len(self.projects) == 1 else 's'} and "
            f"{_count(self.pools, 'pool')} queues re-created"
        ]
        if self.workloads:
            more = len(self.workloads) - 10
            parts.append(
                f"{_count(self.workloads, 'workload')} Job"
                f"{' was' if len(self.workloads) == 1 else 's were'} gone (each retried as a new "
                f"attempt): {', '.join(self.workloads[:10])}"
                + (f" and {more} more" if more > 0 else "")
            )
        return "; ".join(parts) + "."


def _count(items: list[str], noun: str) -> str:
    """`1 project's`, `2 projects'`."""
    return f"1 {noun}'s" if len(items) == 1 else f"{len(items)} {noun}s'"


async def heal_after_sync(engine: Reconciler, ctx: StepContext) -> Healed:
    """Wake every live resource whose cluster objects the synced caches lack; say which."""
    informers = ctx.informers
    async with ctx.db.connection() as conn:
        projects = await reconciling.project_namespaces(conn)
        pools = await reconciling.pool_routes(conn)
        workloads = await reconciling.live_workload_jobs(conn)
    healed = Healed()
    without_namespace: set[str] = set()
    for project_id, project in projects:
        if informers.namespaces.get(None, namespace_for(project)) is None:
            without_namespace.add(project)
            healed.projects.append(project)
            engine.wake("project", project_id)
    for pool_id, project, pool in pools:
        queue = informers.cluster_queues.get(None, cluster_queue_name(project, pool))
        if queue is None or project in without_namespace:
            healed.pools.append(f"{project}/{pool}")
            engine.wake("pool", pool_id)
    lost: dict[uuid.UUID, str] = {}
    for workload in workloads:
        job_name = workload.job_name
        if job_name and informers.jobs.get(namespace_for(workload.project), job_name) is None:
            healed.workloads.append(f"{workload.project}/{workload.name} ({workload.state})")
            lost[workload.id] = workload.job_uid or ""
            engine.wake("workload", workload.id)
    if healed:
        log.warning("the cluster lacks objects aicp made: %s", healed.sentence())
    if lost:
        await _settle(ctx, lost)
    return healed


async def _settle(ctx: StepContext, lost: dict[uuid.UUID, str]) -> None:
    """Wait until no woken workload is reported on its lost Job any more (bounded)."""
    deadline = time.monotonic() + SETTLE_LIMIT_SECONDS
    ids, uids = list(lost), [uid for uid in lost.values() if uid]
    while True:
        async with ctx.db.connection() as conn:
            left = await reconciling.workloads_still_on_jobs(conn, ids, uids)
        if not left:
            return
        if time.monotonic() >= deadline:
            log.warning(
                "%d workloads still report a Job the cluster lacks after %.0f s; ready anyway",
                left,
                SETTLE_LIMIT_SECONDS,
            )
            return
        await asyncio.sleep(SETTLE_POLL_SECONDS)
