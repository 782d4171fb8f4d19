"""What the API answers for compute pools (docs/API.md "Compute pools").

A pool's resource is built from its stored row plus the usage the store counts from the
workloads that reference it. `status.cluster_queue` and `status.local_queue` are the Kueue
objects the reconciler creates for the pool; they are derived names (`app.domain.naming`),
shown from the moment the pool is accepted so users and operators can find them.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import msgspec

from app.domain import naming
from app.domain.specs import CreatedBy, Quota
from app.domain.states import ResourceState

if TYPE_CHECKING:
    from app.domain.rows import Row

_STATE = msgspec.Meta(
    description="PENDING (accepted), READY, DEGRADED or DELETING", examples=[ResourceState.READY]
)
_REASON = msgspec.Meta(
    description="why the pool is in its state, as a whole sentence",
    examples=["Ready: 8 of 16 nvidia.com/gpu in use by 1 workload, 2 workloads waiting."],
)


class PoolUsage(msgspec.Struct, kw_only=True):
    """What the pool's workloads hold right now: the counters from aicp's own records, cpu and
    memory as the pool's Kueue ClusterQueue reports them (`status.flavorsUsage`)."""

    accelerators_admitted: Annotated[
        int,
        msgspec.Meta(
            ge=0, description="accelerators held by admitted or running workloads", examples=[8]
        ),
    ] = 0
    workloads_admitted: Annotated[
        int, msgspec.Meta(ge=0, description="workloads admitted or running", examples=[1])
    ] = 0
    workloads_pending: Annotated[
        int,
        msgspec.Meta(
            ge=0, description="workloads accepted or queued, not yet admitted", examples=[2]
        ),
    ] = 0
    cpu_admitted: Annotated[
        str,
        msgspec.Meta(
            description="cpu cores held by admitted workloads, as Kueue's ClusterQueue reports "
            "them (a decimal number of cores; `0` until the reconciler has read the queue)",
            examples=["32", "0.5"],
        ),
    ] = "0"
    memory_admitted: Annotated[
        str,
        msgspec.Meta(
            description="memory held by admitted workloads, as Kueue's ClusterQueue reports "
            "it, in bytes (`0` until the reconciler has read the queue)",
            examples=["137438953472"],
        ),
    ] = "0"


class PoolStatus(msgspec.Struct, kw_only=True):
    """Where the pool's Kueue objects are on their way to existing and matching the spec."""

    state: Annotated[ResourceState, _STATE]
    reason: Annotated[str, _REASON]
    observed_generation: Annotated[
        int,
        msgspec.Meta(ge=0, description="the generation the cluster objects reflect", examples=[1]),
    ]
    updated_at: datetime
    cluster_queue: Annotated[
        str,
        msgspec.Meta(
            description="Kueue ClusterQueue of this pool", examples=["aicp-research-h100-pool"]
        ),
    ]
    local_queue: Annotated[
        str,
        msgspec.Meta(
            description="Kueue LocalQueue in the project namespace", examples=["h100-pool"]
        ),
    ]
    usage: PoolUsage


class PoolResource(msgspec.Struct, kw_only=True):
    """A compute pool: a quota of one accelerator class plus cpu and memory."""

    name: Annotated[str, msgspec.Meta(examples=["h100-pool"])]
    project: Annotated[str, msgspec.Meta(examples=["research"])]
    uid: uuid.UUID
    accelerator_class: Annotated[str, msgspec.Meta(examples=["h100-80g"])]
    quota: Quota
    generation: Annotated[
        int,
        msgspec.Meta(
            ge=1, description="bumped by every quota change; send as If-Match", examples=[1]
        ),
    ]
    created_at: datetime
    updated_at: datetime
    created_by: CreatedBy
    status: PoolStatus


DEFAULT_POOL_REASON = "Accepted; waiting for the controller to create the pool's queues."


def pool_from_row(row: Row, project: str) -> PoolResource:
    """Build the API resource from a `compute_pools` row.

    The row carries the table's columns, with `spec` decoded to a dict, plus the usage
    counters `accelerators_admitted`, `workloads_admitted`, `workloads_pending` (every pool
    query in `sql/queries.sql` selects them). cpu and memory in use are the reconciler's last
    reading of the ClusterQueue, kept in the row's `observed.usage`.
    """
    name: str = row["name"]
    observed = row["observed"]
    seen = observed.get("usage") if isinstance(observed, dict) else None
    seen = seen if isinstance(seen, dict) else {}
    return PoolResource(
        name=name,
        project=project,
        uid=row["id"],
        accelerator_class=row["accelerator_class"],
        quota=msgspec.convert(row["spec"]["quota"], Quota),
        generation=row["generation"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        created_by=row["created_by"],
        status=PoolStatus(
            state=row["state"],
            reason=row["state_reason"] or DEFAULT_POOL_REASON,
            observed_generation=row["observed_generation"],
            updated_at=row["updated_at"],
            cluster_queue=naming.cluster_queue_name(project, name),
            local_queue=naming.local_queue_name(name),
            usage=PoolUsage(
                accelerators_admitted=row["accelerators_admitted"],
                workloads_admitted=row["workloads_admitted"],
                workloads_pending=row["workloads_pending"],
                cpu_admitted=str(seen.get("cpu_admitted") or "0"),
                memory_admitted=str(seen.get("memory_admitted") or "0"),
            ),
        ),
    )


class PoolList(msgspec.Struct, kw_only=True):
    """A page of compute pools, newest first; pass `next_cursor` as `cursor` for the next page."""

    items: list[PoolResource]
    next_cursor: Annotated[str | None, msgspec.Meta(description="null on the last page")]
