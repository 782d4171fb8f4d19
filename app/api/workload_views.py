"""`.../workloads/{name}/logs` and `.../workloads/{name}/manifest`: two views of a workload's
current generation that are not stored as such.

- `/logs?tail=N` (N in 1..10000, default 100) is the one live read from Kubernetes (docs/DESIGN.md
  §2): the `main` container's last N lines of every pod of the current generation's Job, as
  `text/plain`. With more than one pod every line is prefixed with `[<pod name>] `. No pod yet
  (nothing created, not admitted, or already removed) is a 404 whose detail says why; the
  cluster being unreachable is a 503. An API served without Kubernetes (tests of the API
  alone; `python -m app serve` always has a cluster) has no pods to show: 404.
  `since_seconds=S` keeps only lines newer than S seconds (as the kubelet keeps them);
  `replica=N` shows only the N-th pod (0-based, pods in name order). `follow=true` streams
  instead: the same lines first, then each line as the container prints it, ending when every
  followed container has ended (pods not started yet are 404 until one starts). Follows are
  counted per replica, token and project (app/streams/follows.py): 429 beyond a limit.
- `/manifest` is the Job for the current generation exactly as aicp applies it when creating
  it: `render_job` over the stored row, so it never depends on the cluster.

Both follow the tenancy rules of every `GET`: any member of the project reads them.
"""

from typing import Annotated, Any

import msgspec
from litestar import Request, Response, get
from litestar.params import Parameter
from litestar.response import Stream

from app.api.auth import ProjectRef
from app.api.deps import CallerDep, DbDep
from app.api.docs import READ, problems
from app.api.pod_logs import (
    DEFAULT_TAIL,
    Follow,
    Since,
    Tail,
    follow_slot,
    follow_stream,
    joined_text,
    started,
)
from app.api.workloads import ONE, NamePath
from app.domain.errors import FieldError, NotFound, ValidationFailed
from app.domain.kube_objects import Manifest, completion_index
from app.domain.labels import GENERATION_LABEL, MAIN_CONTAINER, UID_LABEL
from app.domain.render import render_job
from app.domain.render.inputs import JobIdentity
from app.domain.specs import WorkloadSpec
from app.kube.apply import LogRead
from app.kube.client import KubeClient
from app.kube.resources import request_json
from app.store import reconciling, workloads
from app.store.db import Database
from app.store.reconciling import WorkloadRow
from app.streams.follows import Follows, OpenFollow

Replica = Annotated[
    int | None,
    Parameter(ge=0, le=63, description="Only the N-th pod (0-based, pods in name order)"),
]
Rank = Annotated[
    int | None,
    Parameter(ge=0, le=63, description="Only rank N's pod (a multi-node workload, 0-based)"),
]


async def _current_row(db: Database, project: ProjectRef, name: str) -> WorkloadRow:
    """The stored workload (404 `not-found`, like every read, when the name is not visible)."""
    async with db.connection() as conn:
        workload_id = await workloads.get_id(conn, project, name)
        row = await reconciling.load_workload(conn, workload_id)
    if row is None:  # finalized between the two reads
        raise NotFound(f"Workload {name!r} does not exist.")
    return row


def _identity(row: WorkloadRow) -> JobIdentity:
    return JobIdentity(
        project=row.project, workload=row.name, uid=str(row.id), generation=row.generation
    )


@get(
    ONE + "/manifest",
    summary="The Job manifest of the current generation",
    description="The batch/v1 Job aicp applies (server-side apply, field manager `aicp`) to "
    "create the current generation's Job: rendered from the stored spec, so it is available "
    "before the Job exists. Kueue later unsuspends it and adds the flavor's node selector.",
    responses=problems(*READ),
    tags=["workloads"],
    operation_id="getWorkloadManifest",
)
async def get_manifest(caller: CallerDep, db: DbDep, name: str = NamePath) -> dict[str, Any]:
    row = await _current_row(db, caller.require_project(), name)
    spec = msgspec.convert(row.spec, WorkloadSpec)
    return render_job(_identity(row), spec, row.accelerator_resource)


async def _pods(kube: KubeClient, row: WorkloadRow) -> list[Manifest]:
    identity = _identity(row)
    selector = f"{UID_LABEL}={row.id},{GENERATION_LABEL}={row.generation}"
    listed = await request_json(
        kube.core.list_namespaced_pod(
            identity.namespace, label_selector=selector, _preload_content=False
        )
    )
    items: list[Manifest] = listed.get("items") or []
    return sorted(items, key=lambda pod: str(pod["metadata"]["name"]))


def _by_rank(pods: list[Manifest]) -> dict[int, Manifest]:
    """The newest pod of each rank (an earlier attempt's pod may still be going)."""
    newest: dict[int, Manifest] = {}
    for pod in pods:
        rank = completion_index(pod)
        if rank is None:
            continue
        created = str(pod["metadata"].get("creationTimestamp") or "")
        seen = newest.get(rank)
        if seen is None or created >= str(seen["metadata"].get("creationTimestamp") or ""):
            newest[rank] = pod
    return dict(sorted(newest.items()))


def _prefixed(pods: list[Manifest], ranks: bool) -> list[tuple[Manifest, str]]:
    """Each pod with the prefix of its lines: `[rank N] ` for the ranks of a multi-node
    workload, `[<pod>] ` when a single-node workload has several pods, else none."""
    if ranks:
        return [(pod, f"[rank {rank}] ") for rank, pod in _by_rank(pods).items()]
    several = len(pods) > 1
    return [(pod, f"[{pod['metadata']['name']}] " if several else "") for pod in pods]


def _check_selectors(row: WorkloadRow, replica: int | None, rank: int | None) -> None:
    """`replica` is for workloads of one node, `rank` for multi-node ones (422 otherwise)."""
    nodes = int(row.spec.get("nodes") or 1)
    replicas = int(row.spec.get("replicas") or 1)
    if nodes > 1 and replica is not None:
        message = f"a multi-node workload ({nodes} nodes) has ranks: use rank instead"
        raise ValidationFailed([FieldError("replica", message)])
    if nodes == 1 and rank is not None:
        message = "the workload runs on one node: use replica for its pods"
        raise ValidationFailed([FieldError("rank", message)])
    if rank is not None and rank >= nodes:
        raise ValidationFailed(
            [FieldError("rank", f"must be below the workload's nodes ({nodes})")]
        )
    if replica is not None and replica >= replicas:
        raise ValidationFailed(
            [FieldError("replica", f"must be below the workload's replicas ({replicas})")]
        )


@get(
    ONE + "/logs",
    summary="Logs of the current generation's pods",
    description="The last `tail` lines (1 to 10000, default 100) of the main container of "
    "every pod of the current generation's Job, read live from Kubernetes, as `text/plain`. "
    "With several pods each line is prefixed with `[<pod name>] `. 404 while the workload has "
    "no pod (not created or admitted yet, or removed); 503 when Kubernetes is unreachable. "
    "`since_seconds` keeps only newer lines; `replica=N` shows the N-th pod only (0-based, in "
    "name order). A multi-node workload's lines are prefixed `[rank N] ` instead, and "
    "`rank=N` shows rank N only (`replica` is 422 for it). `follow=true` streams: those "
    "lines, then each new one as it is printed, "
    "until every followed container has ended (404 while no pod has started).",
    media_type="text/plain",
    responses=problems(*READ),
    tags=["workloads"],
    operation_id="getWorkloadLogs",
)
async def get_logs(
    request: Request[Any, Any, Any],
    caller: CallerDep,
    db: DbDep,
    name: str = NamePath,
    tail: Tail = DEFAULT_TAIL,
    since_seconds: Since = None,
    replica: Replica = None,
    rank: Rank = None,
    follow: Follow = False,
) -> Response[Any]:
    project = caller.require_project()
    with follow_slot(request, caller.actor, project.id, follow) as (follows, held):
        row = await _current_row(db, project, name)
        _check_selectors(row, replica, rank)
        kube: KubeClient | None = request.app.state.get("kube")
        if kube is None:
            raise NotFound(f"Workload {name!r} has no pods: this server runs without Kubernetes.")
        chosen = await _chosen_pods(kube, row, name, replica, rank)
        namespace = _identity(row).namespace
        read = LogRead(MAIN_CONTAINER, tail, since_seconds)
        if follow:
            return _follow_stream(request, follows, held, kube, row, name, namespace, chosen, read)
        body = await joined_text(kube, namespace, chosen, read)
        return Response(body, media_type="text/plain; charset=utf-8")


async def _chosen_pods(
    kube: KubeClient, row: WorkloadRow, name: str, replica: int | None, rank: int | None
) -> list[tuple[Manifest, str]]:
    """The pods whose logs are shown, each with the prefix of its lines: all of them, or the
    one `replica` or `rank` picks; 404 when there is no such pod (or none at all) yet."""
    pods = await _pods(kube, row)
    if not pods:
        raise NotFound(
            f"Workload {name!r} has no pods for generation {row.generation} "
            f"(state {row.state}): logs appear once its Job is admitted and its pods start."
        )
    if replica is not None:
        if replica >= len(pods):
            raise NotFound(f"Workload {name!r} has no pod {replica} (it has {len(pods)}).")
        pods = [pods[replica]]
    chosen = _prefixed(pods, ranks=int(row.spec.get("nodes") or 1) > 1)
    if rank is not None:
        chosen = [(pod, "") for pod, label in chosen if label == f"[rank {rank}] "]
        if not chosen:
            raise NotFound(f"Workload {name!r} has no pod of rank {rank} yet.")
    return chosen


def _follow_stream(
    request: Request[Any, Any, Any],
    follows: Follows | None,
    held: OpenFollow | None,
    kube: KubeClient,
    row: WorkloadRow,
    name: str,
    namespace: str,
    chosen: list[tuple[Manifest, str]],
    read: LogRead,
) -> Stream:
    """`follow=true`: the chosen pods that have started, streamed line by line (counted against
    the follow limits) until their containers end; 404 while none has started."""
    running = [(str(pod["metadata"]["name"]), label) for pod, label in chosen if started(pod)]
    if not running:
        raise NotFound(
            f"No pod of workload {name!r} has started yet (state {row.state}); follow "
            "its logs once it runs."
        )
    return follow_stream(request, follows, held, kube, namespace, running, read)


ROUTES = [get_logs, get_manifest]
