"""What the API answers for workloads and their events (docs/API.md "Workloads").

A workload's resource is its stored row: the spec as submitted with defaults filled, the
generation, and a status assembled from the row's `state`, `state_reason`,
`observed_generation`, `updated_at` and the `observed` jsonb the reconciler writes.

`observed` (written only by the reconciler, read here) has this shape; every key is optional:

    {"job": {"name": str, "uid": str},
     "admission": {"cluster_queue": str, "flavor": str, "admitted_at": RFC 3339},
     "nodes": [str], "accelerator": {"product": str, "memory_mib": int, "count": int},
     "attempts": int, "started_at": RFC 3339, "finished_at": RFC 3339, "exit_code": int,
     "queue": QueueStanding (QUEUED only),
     "kueue_workload": {"created_at": RFC 3339, "uid": str}}

A QUEUED workload's reason starts with its standing's sentence (`Queued 3rd in pool h100-pool;
likely to start in 12-25 min.`), as of the row's last write; the API recomputes both when it
answers a read (`app.api.standings`).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Literal

import msgspec

from app.domain.events import EventReason, EventType
from app.domain.planning.standing import QueueStanding, queued_sentence
from app.domain.specs import CreatedBy, WorkloadSpec
from app.domain.states import WorkloadState

if TYPE_CHECKING:
    from app.domain.rows import Row

ACCEPTED_REASON = "Accepted; waiting for the controller to create the Job."


class JobRef(msgspec.Struct, kw_only=True):
    """The Kubernetes Job running the current generation."""

    name: Annotated[str, msgspec.Meta(examples=["train-7b-3f2a1c-g1"])]
    uid: Annotated[str | None, msgspec.Meta(description="set once the Job exists")] = None


class Admission(msgspec.Struct, kw_only=True):
    """Kueue's admission of the workload: where its quota was reserved."""

    cluster_queue: Annotated[str, msgspec.Meta(examples=["aicp-research-h100-pool"])]
    flavor: Annotated[str | None, msgspec.Meta(examples=["h100-80g"])] = None
    admitted_at: datetime | None = None


class KueueWorkloadRef(msgspec.Struct, kw_only=True):
    """The Kueue Workload of the current Job as Kueue orders it in its queue (after the
    priority): its creation time, in whole seconds as Kubernetes keeps it, then its uid.
    Internal: not part of the API's status."""

    created_at: datetime
    uid: str


class AcceleratorFacts(msgspec.Struct, kw_only=True):
    """The accelerators the workload ran on, as reported by the nodes."""

    product: Annotated[str | None, msgspec.Meta(examples=["NVIDIA-H100-80GB-HBM3"])] = None
    memory_mib: Annotated[int | None, msgspec.Meta(examples=[81559])] = None
    count: Annotated[int | None, msgspec.Meta(examples=[8])] = None


class RankFacts(msgspec.Struct, kw_only=True):
    """One rank of a multi-node workload: its pod, where it ran, and how it ended."""

    rank: Annotated[int, msgspec.Meta(ge=0, examples=[0])]
    pod: Annotated[str | None, msgspec.Meta(examples=["train-7b-3f2a1c-g1-0-x7k2p"])] = None
    node: Annotated[str | None, msgspec.Meta(examples=["gpu-node-1"])] = None
    accelerator_product: Annotated[str | None, msgspec.Meta(examples=["NVIDIA-H100-80GB-HBM3"])] = (
        None
    )
    phase: Annotated[
        str | None,
        msgspec.Meta(
            description="the pod's phase: Pending, Running, Succeeded or Failed",
            examples=["Running"],
        ),
    ] = None
    exit_code: int | None = None
    oom_killed: bool = False
    started_at: datetime | None = None
    finished_at: datetime | None = None


class ObservedFacts(msgspec.Struct, kw_only=True):
    """Decoder for the `observed` column; unknown keys are ignored (the reconciler may grow)."""

    job: JobRef | None = None
    admission: Admission | None = None
    nodes: list[str] = []
    accelerator: AcceleratorFacts | None = None
    attempts: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    ranks: list[RankFacts] = []
    #: QUEUED: the standing the controller last wrote (app.reconcile.steps.planning).
    queue: QueueStanding | None = None
    #: The current Job's Kueue Workload, for the queue's order (app.store.planning).
    kueue_workload: KueueWorkloadRef | None = None


class WorkloadStatus(msgspec.Struct, kw_only=True, omit_defaults=False):
    """The workload's true state, the reason for it, and the evidence of where it ran."""

    state: Annotated[
        WorkloadState,
        msgspec.Meta(
            description="Where the workload is: PENDING (accepted), QUEUED, ADMITTED, RUNNING, "
            "SUCCEEDED, FAILED, or DELETING",
            examples=[WorkloadState.RUNNING],
        ),
    ]
    reason: Annotated[
        str,
        msgspec.Meta(
            description="why the workload is in its state, as a whole sentence",
            examples=["1 of 1 pods running on node gpu-node-1 (NVIDIA-H100-80GB-HBM3)."],
        ),
    ]
    observed_generation: Annotated[
        int, msgspec.Meta(ge=0, description="the generation this status describes", examples=[1])
    ]
    job: JobRef | None = None
    admission: Admission | None = None
    nodes: Annotated[list[str], msgspec.Meta(examples=[["gpu-node-1"]])] = []
    accelerator: AcceleratorFacts | None = None
    attempts: Annotated[int, msgspec.Meta(ge=0, description="Job runs so far", examples=[1])] = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    ranks: Annotated[
        list[RankFacts],
        msgspec.Meta(description="per rank of a multi-node workload (empty for one node)"),
    ] = []
    queue: Annotated[
        QueueStanding | None,
        msgspec.Meta(
            description="QUEUED only: its place in the pool's queue and an estimate of when "
            "Kueue admits it (computed when read; a stream's events carry it as of the change)"
        ),
    ] = None
    updated_at: datetime


class WorkloadResource(msgspec.Struct, kw_only=True):
    """A batch accelerator job: the spec as submitted and its observed status."""

    name: Annotated[str, msgspec.Meta(examples=["train-7b"])]
    project: Annotated[str, msgspec.Meta(examples=["research"])]
    compute_pool: Annotated[str, msgspec.Meta(examples=["h100-pool"])]
    uid: uuid.UUID
    generation: Annotated[
        int, msgspec.Meta(ge=1, description="bumped by every PUT; send as If-Match", examples=[1])
    ]
    spec: WorkloadSpec
    created_at: datetime
    updated_at: datetime
    created_by: CreatedBy
    status: WorkloadStatus


class EventResource(msgspec.Struct, kw_only=True):
    """One entry of a resource's audit and lifecycle trail, newest first in lists."""

    at: datetime
    type: Annotated[
        EventType,
        msgspec.Meta(
            description="What happened: one of a closed set, each explained in the API "
            "contract's event table",
            examples=[EventType.ACCEPTED],
        ),
    ]
    reason: Annotated[
        EventReason | None,
        msgspec.Meta(description="A word refining the type", examples=[EventReason.CREATED]),
    ] = None
    message: Annotated[
        str | None,
        msgspec.Meta(
            examples=["Workload train-7b accepted at generation 1 in compute pool h100-pool."]
        ),
    ] = None
    generation: Annotated[int | None, msgspec.Meta(examples=[1])] = None
    actor: Annotated[
        str,
        msgspec.Meta(
            description="`admin`, `token:<id>` or `controller:<instance>`", examples=["admin"]
        ),
    ]
    actor_name: Annotated[
        str,
        msgspec.Meta(
            description="The actor for people: `admin`, `token <name>` (the project token's "
            "name, kept after it is revoked) or `controller:<instance>`",
            examples=["token lead"],
        ),
    ]


def workload_from_row(row: Row, project: str) -> WorkloadResource:
    """Build the API resource from a `workloads` row (`spec`, `observed` decoded to dicts)."""
    spec = msgspec.convert(row["spec"], WorkloadSpec)
    observed = msgspec.convert(row["observed"] or {}, ObservedFacts, strict=False)
    reason = row["state_reason"] or ACCEPTED_REASON
    queue = observed.queue if row["state"] == WorkloadState.QUEUED else None
    if queue is not None:
        reason = f"{queued_sentence(queue, spec.compute_pool, row['updated_at'])} {reason}"
    return WorkloadResource(
        name=row["name"],
        project=project,
        compute_pool=spec.compute_pool,
        uid=row["id"],
        generation=row["generation"],
        spec=spec,
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        created_by=row["created_by"],
        status=WorkloadStatus(
            state=row["state"],
            reason=reason,
            observed_generation=row["observed_generation"],
            job=observed.job,
            admission=observed.admission,
            nodes=observed.nodes,
            accelerator=observed.accelerator,
            attempts=observed.attempts,
            started_at=observed.started_at,
            finished_at=observed.finished_at,
            exit_code=observed.exit_code,
            ranks=observed.ranks,
            queue=queue,
            updated_at=row["updated_at"],
        ),
    )


def event_from_row(row: Row) -> EventResource:
    """Build an event from an `events` row."""
    return EventResource(
        at=row["at"],
        type=EventType(row["type"]),
        reason=EventReason(row["reason"]) if row["reason"] is not None else None,
        message=row["message"],
        generation=row["generation"],
        actor=row["actor"],
        actor_name=actor_name(row["actor"], row["actor_token_name"]),
    )


def actor_name(actor: str, token_name: str | None) -> str:
    """`token <name>` for a project token whose name is known; the actor as recorded else."""
    return f"token {token_name}" if token_name is not None else actor


class WorkloadList(msgspec.Struct, kw_only=True):
    """A page of workloads, newest first; pass `next_cursor` as `cursor` for the next page."""

    items: list[WorkloadResource]
    next_cursor: Annotated[str | None, msgspec.Meta(description="null on the last page")]


class WatchEvent(msgspec.Struct, kw_only=True):
    """One event of a workload stream (`text/event-stream`), the `data:` line of an SSE event
    whose `event:` is the same `type` and whose `id:` is the change number to resume after
    (`Last-Event-ID`). ADDED: the workload as the stream starts, or one that appears or starts
    matching the filters; MODIFIED: its state, reason, admission, nodes, evidence or spec
    changed; DELETED: it is gone (the stream of one workload ends), or no longer matches."""

    type: Annotated[Literal["ADDED", "MODIFIED", "DELETED"], msgspec.Meta(examples=["MODIFIED"])]
    object: WorkloadResource


class EventList(msgspec.Struct, kw_only=True):
    """A page of events, newest first; pass `next_cursor` as `cursor` for the next page."""

    items: list[EventResource]
    next_cursor: Annotated[str | None, msgspec.Meta(description="null on the last page")]
