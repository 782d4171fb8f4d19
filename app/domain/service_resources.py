"""What the API answers for inference services (docs/API.md "Services").

A service's resource is its stored row: the spec as submitted with defaults filled, the
generation, and a status assembled from the row's `state`, `state_reason`,
`observed_generation`, `updated_at` and the `observed` jsonb the reconciler writes, of this
shape (every key optional):

    {"deployment": {"name": str, "uid": str},
     "endpoint": "<name>.<namespace>.svc:<port>",
     "replicas": {"desired": int, "ready": int, "updated": int, "waiting_for_quota": int},
     "nodes": [str],
     "pods": [{"name", "node", "phase", "ready", "restarts", "waiting_for_quota",
               "last_termination": {"reason", "exit_code", "finished_at"}}]}
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Literal

import msgspec

from app.domain.service_specs import ServiceSpec
from app.domain.specs import CreatedBy
from app.domain.states import ServiceState

if TYPE_CHECKING:
    from app.domain.rows import Row

ACCEPTED_REASON = "Accepted; waiting for the controller to apply the Deployment."


class DeploymentRef(msgspec.Struct, kw_only=True):
    """The Kubernetes Deployment that runs the service's replicas."""

    name: Annotated[str, msgspec.Meta(examples=["llama-chat"])]
    uid: Annotated[str | None, msgspec.Meta(description="set once it exists")] = None


class ReplicaCounts(msgspec.Struct, kw_only=True, omit_defaults=False):
    """How many replicas are asked for and how many of them are where."""

    desired: Annotated[
        int, msgspec.Meta(ge=0, description="asked for (or set by the autoscaler)", examples=[2])
    ] = 0
    ready: Annotated[int, msgspec.Meta(ge=0, description="ready to take traffic")] = 0
    updated: Annotated[
        int, msgspec.Meta(ge=0, description="running the current generation's pod template")
    ] = 0
    waiting_for_quota: Annotated[
        int, msgspec.Meta(ge=0, description="held back by Kueue until the pool has quota")
    ] = 0


class Termination(msgspec.Struct, kw_only=True):
    """How a replica's container last ended."""

    reason: Annotated[str | None, msgspec.Meta(examples=["OOMKilled"])] = None
    exit_code: int | None = None
    finished_at: datetime | None = None


class ReplicaFacts(msgspec.Struct, kw_only=True):
    """One replica (pod) of the service."""

    name: Annotated[str, msgspec.Meta(examples=["llama-chat-6d9f7c8b5-x2k4q"])]
    node: Annotated[str | None, msgspec.Meta(examples=["gpu-node-0"])] = None
    phase: Annotated[str | None, msgspec.Meta(examples=["Running"])] = None
    ready: bool = False
    restarts: Annotated[int, msgspec.Meta(ge=0)] = 0
    waiting_for_quota: bool = False
    last_termination: Termination | None = None


class ServiceObserved(msgspec.Struct, kw_only=True):
    """Decoder for the `observed` column; unknown keys are ignored."""

    deployment: DeploymentRef | None = None
    endpoint: str | None = None
    replicas: ReplicaCounts | None = None
    nodes: list[str] = []
    pods: list[ReplicaFacts] = []


class ServiceStatus(msgspec.Struct, kw_only=True, omit_defaults=False):
    """The service's true state, the reason for it, and where its replicas run."""

    state: Annotated[
        ServiceState,
        msgspec.Meta(
            description="PENDING (accepted), PROGRESSING, READY, DEGRADED or DELETING",
            examples=[ServiceState.READY],
        ),
    ]
    reason: Annotated[
        str,
        msgspec.Meta(
            description="why the service is in its state, as a whole sentence",
            examples=["2 of 2 replicas ready on gpu-node-0, gpu-node-1."],
        ),
    ]
    observed_generation: Annotated[
        int, msgspec.Meta(ge=0, description="the generation this status describes", examples=[1])
    ]
    endpoint: Annotated[
        str | None,
        msgspec.Meta(
            description="where the project's pods reach the service",
            examples=["llama-chat.aicp-research.svc:8000"],
        ),
    ] = None
    deployment: DeploymentRef | None = None
    replicas: ReplicaCounts = msgspec.field(default_factory=ReplicaCounts)
    nodes: Annotated[list[str], msgspec.Meta(examples=[["gpu-node-0", "gpu-node-1"]])] = []
    pods: list[ReplicaFacts] = []
    updated_at: datetime


class ServiceResource(msgspec.Struct, kw_only=True):
    """An inference service: the spec as submitted and its observed status."""

    name: Annotated[str, msgspec.Meta(examples=["llama-chat"])]
    project: Annotated[str, msgspec.Meta(examples=["research"])]
    compute_pool: Annotated[str, msgspec.Meta(examples=["h100-pool"])]
    uid: uuid.UUID
    generation: Annotated[
        int,
        msgspec.Meta(
            ge=1, description="bumped by every PUT and PATCH; send as If-Match", examples=[1]
        ),
    ]
    spec: ServiceSpec
    created_at: datetime
    updated_at: datetime
    created_by: CreatedBy
    status: ServiceStatus


class ServiceList(msgspec.Struct, kw_only=True):
    """A page of services, newest first; pass `next_cursor` as `cursor` for the next page."""

    items: list[ServiceResource]
    next_cursor: Annotated[str | None, msgspec.Meta(description="null on the last page")]


class ServiceWatchEvent(msgspec.Struct, kw_only=True):
    """One event of a service stream, as `WatchEvent` is of a workload stream. ADDED: the
    service as the stream starts, or one that appears or starts matching the filters;
    MODIFIED: its spec, state, reason, replicas, pods or endpoint changed; DELETED: it is gone
    (the stream of one service ends), or no longer matches."""

    type: Annotated[Literal["ADDED", "MODIFIED", "DELETED"], msgspec.Meta(examples=["MODIFIED"])]
    object: ServiceResource


def service_from_row(row: Row, project: str) -> ServiceResource:
    """Build the API resource from a `services` row (`spec`, `observed` decoded to dicts)."""
    spec = msgspec.convert(row["spec"], ServiceSpec)
    observed = msgspec.convert(row["observed"] or {}, ServiceObserved, strict=False)
    return ServiceResource(
        name=row["name"],
        project=project,
        compute_pool=spec.compute_pool,
        uid=row["id"],
        generation=row["generation"],
        spec=spec,
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        created_by=row["created_by"],
        status=ServiceStatus(
            state=row["state"],
            reason=row["state_reason"] or ACCEPTED_REASON,
            observed_generation=row["observed_generation"],
            endpoint=observed.endpoint,
            deployment=observed.deployment,
            replicas=observed.replicas or ReplicaCounts(),
            nodes=observed.nodes,
            pods=observed.pods,
            updated_at=row["updated_at"],
        ),
    )
