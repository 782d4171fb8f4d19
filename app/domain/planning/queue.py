"""A compute pool's queue as Kueue orders it, and what its workloads ask of the quota.

Every pool renders a ClusterQueue of its own (`app.domain.render.queues.render_cluster_queue`)
with Kueue's default queueing strategy, `BestEffortFIFO`, no cohort and no fair sharing. Kueue
then orders the pending workloads of the queue by priority (higher first), then by the
creation time of their Kueue Workload (older first, in whole seconds as Kubernetes keeps it),
then by the Workloads' uids; a head that does not fit does not block the ones behind it
(unlike `StrictFIFO`): the next one that fits is admitted. A preempted workload keeps its
Workload, so it keeps its place.

The Workload is created with the Job, and aicp creates a Job for each generation: the order
time here is the Workload's creation and its uid once the controller has seen it
(`observed.kueue_workload`), before that when the current generation was accepted
(`generation_at`, a few milliseconds before its Job).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.domain.quantity import parse_quantity

if TYPE_CHECKING:
    import uuid
    from datetime import datetime

    from app.domain.specs import Quota, WorkloadSpec


@dataclass(frozen=True, slots=True)
class Demand:
    """What a workload holds of its pool's quota while admitted: replicas x per-replica."""

    accelerators: int
    cpu_millis: int
    memory_bytes: int

    def __add__(self, other: Demand) -> Demand:
        return Demand(
            self.accelerators + other.accelerators,
            self.cpu_millis + other.cpu_millis,
            self.memory_bytes + other.memory_bytes,
        )

    def __sub__(self, other: Demand) -> Demand:
        return Demand(
            self.accelerators - other.accelerators,
            self.cpu_millis - other.cpu_millis,
            self.memory_bytes - other.memory_bytes,
        )

    def fits(self, free: Demand) -> bool:
        return (
            self.accelerators <= free.accelerators
            and self.cpu_millis <= free.cpu_millis
            and self.memory_bytes <= free.memory_bytes
        )


NO_DEMAND = Demand(0, 0, 0)


def demand_of(spec: WorkloadSpec) -> Demand:
    """The quota a (validated) spec holds once admitted."""
    replicas = spec.replicas
    return Demand(
        accelerators=spec.accelerators * replicas,
        cpu_millis=int(parse_quantity(spec.cpu) * 1000) * replicas,
        memory_bytes=int(parse_quantity(spec.memory)) * replicas,
    )


def quota_demand(quota: Quota) -> Demand:
    """A pool's nominal quota in the same units."""
    return Demand(
        accelerators=quota.accelerators,
        cpu_millis=int(parse_quantity(quota.cpu) * 1000),
        memory_bytes=int(parse_quantity(quota.memory)),
    )


_TRAILING_NUMBERS = re.compile(r"(?:-[0-9]+)+$")


def name_stem(name: str) -> str:
    """A workload name without its trailing numbered parts (`sweep-lr-0003` → `sweep-lr`,
    `train-7b-2` → `train-7b`): runs of one experiment share it. A name that is only numbers
    after its first part keeps that part."""
    stem = _TRAILING_NUMBERS.sub("", name)
    return stem or name


@dataclass(frozen=True, slots=True, eq=False)
class Entry:
    """One live workload of a pool, as the planner sees it.

    `holding` is True for a workload Kueue admitted (ADMITTED or RUNNING: it holds quota);
    `held_since` is then when its quota was reserved. A queued one (PENDING or QUEUED) waits
    in the order of `priority`, then `queued_since`. Entries are equal only to themselves
    (the replay moves them between lists by identity).
    """

    id: uuid.UUID
    name: str
    priority: int  # the Kueue priority value (`app.domain.render.queues.PRIORITY_VALUES`)
    queued_since: datetime
    demand: Demand
    max_runtime_seconds: int
    holding: bool = False
    held_since: datetime | None = None
    labels: tuple[tuple[str, str], ...] = ()
    #: The uid of its Kueue Workload once seen: Kueue's order after priority and creation.
    kueue_uid: str = ""

    @property
    def stem(self) -> str:
        return name_stem(self.name)


def order_key(entry: Entry) -> tuple[int, datetime, str, uuid.UUID]:
    """Kueue's order of pending workloads: higher priority first, then older first, then by
    the Workloads' uids (Kueue keeps creation times in whole seconds, so a burst ties)."""
    return (-entry.priority, entry.queued_since, entry.kueue_uid, entry.id)


def in_queue_order(entries: list[Entry]) -> list[Entry]:
    """The waiting entries of `entries`, head first."""
    return sorted((e for e in entries if not e.holding), key=order_key)
