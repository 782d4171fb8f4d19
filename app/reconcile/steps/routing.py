"""From informer events to resource keys (docs/DESIGN.md §5).

The handler runs on an informer's task between two events: it only looks at the object and
in-memory tables and enqueues a key, never doing I/O.

| object        | resource        | how                                                         |
|---------------|-----------------|-------------------------------------------------------------|
| Job, Pod,     | workload        | label `aicp.dev/uid`; for a Job whose label was removed by   |
| Service       |                 |                                                             |
|               |                 | hand, the uid last seen on that Job. A Job being deleted     |
|               |                 | while aicp's finalizer holds it wakes the workload (below)   |
| Kueue Workload| workload        | its owner Job (ownerReferences) → that Job's uid            |
| ClusterQueue  | pool, and the   | by name, through `PoolRoutes` (filled by the pool steps);   |
|               | pool's queued   | its queued workloads (suspended Jobs of that queue in that  |
|               | workloads       | namespace) too: their reason quotes the pool's usage. The   |
|               |                 | Jobs cache indexes the suspended ones (`queued_jobs`), and  |
|               |                 | the changes of one pool are folded: its waiting workloads   |
|               |                 | are woken at once, then at most once per `FANOUT_SECONDS`   |
|               |                 | or per `waiting / FANOUT_WAKES_PER_SECOND` s if longer      |
| Namespace     | project, and    | label `aicp.dev/uid` (the project's id) when it is deleted   |
|               | the project's   | or being deleted (drift: the project step re-creates it);   |
|               | pools           | its pools, through `PoolRoutes`, whenever it comes or goes  |
|               |                 | (their LocalQueue lives in it)                              |
| Node          | —               | nodes change evidence only through the pods that use them   |

Workload keys go through `enqueue_local`: a workload that needs attention is either leased
here, leased by a peer (who sees the same event), or swept within a second. Pool and project
keys use `wake` instead: a settled pool or project needs no sweep, so a changed ClusterQueue
or a deleted namespace (drift) must be able to win its lease back.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from app.domain.kube_objects import is_terminating, key_of, label_of, name_of, namespace_of
from app.domain.labels import (
    EVIDENCE_FINALIZER,
    POOL_LABEL,
    PROJECT_LABEL,
    SERVICE_LABEL,
    UID_LABEL,
)
from app.domain.naming import cluster_queue_name, namespace_for
from app.reconcile.steps.planning import REFRESH_SECONDS
from app.store import reconciling

if TYPE_CHECKING:
    from app.domain.kube_objects import Key, Manifest
    from app.kube.informers import Informers
    from app.kube.watching import EventType
    from app.reconcile.engine import Reconciler
    from app.store.db import Database

log = logging.getLogger(__name__)

#: A pool's waiting workloads are woken for a change of its ClusterQueue at once, then no
#: sooner than this after the last time (the changes meanwhile fold into one wake, which reads
#: the cache as it is then), and no sooner than one wake per waiting workload at
#: `FANOUT_WAKES_PER_SECOND` (at most `REFRESH_SECONDS`, when a queued workload looks again
#: anyway): during a burst Kueue changes a ClusterQueue's usage at every admission and every
#: finish, and waking thousands of waiting workloads for each change costs
#: O(admissions x waiting) steps that only rewrite a usage figure in their reasons.
FANOUT_SECONDS = 1.0
FANOUT_WAKES_PER_SECOND = 50.0


def _uuid(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


class PoolRoutes:
    """ClusterQueue name → pool id, learned from the pool rows the steps read.

    Filled by every pool step and once from the database by the first step after start
    (`load`); a ClusterQueue event that arrives before its pool is known is not routed —
    its next change will be, and pools that still need work are swept anyway.
    """

    def __init__(self) -> None:
        self._by_queue: dict[str, uuid.UUID] = {}
        self._by_project: dict[str, set[uuid.UUID]] = {}
        self.loaded = False

    def learn(self, project: str, pool: str, pool_id: uuid.UUID) -> None:
        self._by_queue[cluster_queue_name(project, pool)] = pool_id
        self._by_project.setdefault(project, set()).add(pool_id)

    def forget(self, pool_id: uuid.UUID) -> None:
        for name in [n for n, i in self._by_queue.items() if i == pool_id]:
            del self._by_queue[name]
        for project in [p for p, ids in self._by_project.items() if pool_id in ids]:
            self._by_project[project].discard(pool_id)
            if not self._by_project[project]:
                del self._by_project[project]

    def pool_of(self, cluster_queue: str) -> uuid.UUID | None:
        return self._by_queue.get(cluster_queue)

    def pools_of(self, project: str) -> list[uuid.UUID]:
        """The pools of a project (by name) known so far."""
        return sorted(self._by_project.get(project, ()))

    async def load(self, db: Database) -> None:
        """Learn every pool (once per process)."""
        if self.loaded:
            return
        async with db.connection() as conn:
            for pool_id, project, pool in await reconciling.pool_routes(conn):
                self.learn(project, pool, pool_id)
        self.loaded = True


class EventRouter:
    """The informer handler: maps each changed object to the resource key it concerns."""

    def __init__(self, engine: Reconciler, informers: Informers, routes: PoolRoutes) -> None:
        self._engine = engine
        self._informers = informers
        self._routes = routes
        # Job (namespace, name) → workload id, so a Job whose uid label was removed by hand
        # still reaches its workload (which then restores the label).
        self._job_owner: dict[Key, uuid.UUID] = {}
        # (namespace, pool) → the earliest its waiting workloads may be woken again, and the
        # wake scheduled for then (if a change came meanwhile).
        self._fanout_next: dict[tuple[str, str], float] = {}
        self._fanout_due: dict[tuple[str, str], asyncio.TimerHandle] = {}

    def __call__(self, event_type: EventType, obj: Manifest) -> None:
        kind = obj.get("kind")
        if kind == "Job":
            self._job(event_type, obj)
        elif label_of(obj, SERVICE_LABEL) is not None:
            # An inference service's Deployment, Service or pod: its own kind of resource.
            self._service(obj)
        elif kind in ("Pod", "Service"):
            self._workload(_uuid(label_of(obj, UID_LABEL)))
        elif kind == "Workload":
            self._kueue_workload(obj)
        elif kind == "ClusterQueue":
            name = name_of(obj)
            pool_id = self._routes.pool_of(name)
            if pool_id is not None:
                self._engine.wake("pool", pool_id)
            self._queued_in(obj)
        elif kind == "Namespace":
            self._namespace(event_type, obj)

    def workload_of_job(self, obj: Manifest) -> uuid.UUID | None:
        """The workload a Job belongs to: its uid label, else the uid last seen on it."""
        found = _uuid(label_of(obj, UID_LABEL))
        return found if found is not None else self._job_owner.get(key_of(obj))

    def _job(self, event_type: EventType, obj: Manifest) -> None:
        workload_id = self.workload_of_job(obj)
        key = key_of(obj)
        if event_type == "DELETED":
            self._job_owner.pop(key, None)
        elif workload_id is not None:
            self._job_owner[key] = workload_id
        meta = obj.get("metadata") or {}
        if (
            workload_id is not None
            and meta.get("deletionTimestamp")
            and EVIDENCE_FINALIZER in (meta.get("finalizers") or ())
        ):
            # A Job held by aicp's finalizer is being deleted: whoever holds the workload's
            # lease must record its evidence, even for a settled workload nobody holds (its
            # finalizer removal failed before); wake claims the lease if it is free.
            self._engine.wake("workload", workload_id)
            return
        self._workload(workload_id)

    def _namespace(self, event_type: EventType, obj: Manifest) -> None:
        """A project's namespace deleted (or being deleted) outside aicp wakes the project,
        which re-creates it; its coming and going wakes the project's pools, whose LocalQueue
        lives in it."""
        project_id = _uuid(label_of(obj, UID_LABEL))
        gone = event_type == "DELETED" or is_terminating(obj)
        if project_id is not None and gone:
            self._engine.wake("project", project_id)
        project = label_of(obj, PROJECT_LABEL)
        if project and (gone or event_type == "ADDED"):
            for pool_id in self._routes.pools_of(project):
                self._engine.wake("pool", pool_id)

    def _queued_in(self, cluster_queue: Manifest) -> None:
        """Wake the workloads waiting in a pool whose usage changed: "Waiting for quota ...
        with 8 in use" must follow the ClusterQueue's numbers, which Kueue updates after it
        has queued them."""
        project = label_of(cluster_queue, PROJECT_LABEL)
        pool = label_of(cluster_queue, POOL_LABEL)
        if not project or not pool:
            return
        key = (namespace_for(project), pool)
        if key in self._fanout_due:
            return  # a wake is due: it will see this change too
        loop = asyncio.get_running_loop()
        delay = self._fanout_next.get(key, 0.0) - loop.time()
        if delay > 0:
            self._fanout_due[key] = loop.call_later(delay, self._wake_waiting, key)
        else:
            self._wake_waiting(key)

    def _wake_waiting(self, key: tuple[str, str]) -> None:
        self._fanout_due.pop(key, None)
        waiting = self._informers.queued_jobs(*key)
        for job in waiting:
            self._workload(self.workload_of_job(job))
        spacing = max(FANOUT_SECONDS, min(REFRESH_SECONDS, len(waiting) / FANOUT_WAKES_PER_SECOND))
        self._fanout_next[key] = asyncio.get_running_loop().time() + spacing

    def _kueue_workload(self, obj: Manifest) -> None:
        namespace = namespace_of(obj)
        for owner in (obj.get("metadata") or {}).get("ownerReferences") or ():
            if owner.get("kind") == "Pod":
                # Kueue's Workload of one replica of a service (its plain-pod integration).
                pod = self._informers.pods.get(namespace, str(owner.get("name") or ""))
                if pod is not None and label_of(pod, SERVICE_LABEL) is not None:
                    self._service(pod)
                continue
            if owner.get("kind") != "Job":
                continue
            job = self._informers.jobs.get(namespace, str(owner.get("name") or ""))
            if job is not None:
                self._workload(self.workload_of_job(job))

    def _service(self, obj: Manifest) -> None:
        service_id = _uuid(label_of(obj, UID_LABEL))
        if service_id is not None:
            self._engine.enqueue_local("service", service_id)

    def _workload(self, workload_id: uuid.UUID | None) -> None:
        if workload_id is not None:
            self._engine.enqueue_local("workload", workload_id)
