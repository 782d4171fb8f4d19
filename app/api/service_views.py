"""`.../services/{name}/logs`: the replicas' logs, read live from Kubernetes (docs/API.md
"Services"). Any member of the project reads them, as every `GET`.

The `main` container's last `tail` lines of every replica pod of the service (all of its
generations while a rollout runs), in pod-name order, each line prefixed `[<pod>] ` when there
are several; `pod=NAME` shows one replica only. `follow=true` streams the started replicas'
lines as they are printed, until their containers end (counted against the follow limits).
404 while the service has no pod, 503 when Kubernetes is unreachable.
"""

from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import Parameter

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
from app.api.services import ONE, NamePath
from app.domain.errors import NotFound
from app.domain.kube_objects import Manifest
from app.domain.labels import MAIN_CONTAINER, SERVICE_LABEL, UID_LABEL
from app.domain.naming import namespace_for
from app.kube.apply import LogRead
from app.kube.client import KubeClient
from app.kube.resources import request_json
from app.store import services

PodName = Annotated[
    str | None,
    Parameter(
        min_length=1,
        max_length=253,
        description="Only this replica's pod (a name `status.pods` lists)",
    ),
]


async def _replicas(kube: KubeClient, namespace: str, name: str, uid: str) -> list[Manifest]:
    selector = f"{SERVICE_LABEL}={name},{UID_LABEL}={uid}"
    listed = await request_json(
        kube.core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False)
    )
    items: list[Manifest] = listed.get("items") or []
    return sorted(items, key=lambda pod: str(pod["metadata"]["name"]))


@get(
    ONE + "/logs",
    summary="Logs of a service's replicas",
    description="The last `tail` lines (1 to 10000, default 100) of the main container of "
    "every replica pod of the service, read live from Kubernetes, as `text/plain`; with "
    "several pods each line is prefixed with `[<pod name>] `. `pod=NAME` shows that replica "
    "only; `since_seconds` keeps only newer lines; `follow=true` streams those lines, then "
    "each new one as it is printed, until every followed container has ended. 404 while the "
    "service has no pod (or no such pod, or none started to follow); 503 when Kubernetes is "
    "unreachable.",
    media_type="text/plain",
    responses=problems(*READ),
    tags=["services"],
    operation_id="getServiceLogs",
)
async def get_service_logs(
    request: Request[Any, Any, Any],
    caller: CallerDep,
    db: DbDep,
    name: str = NamePath,
    tail: Tail = DEFAULT_TAIL,
    since_seconds: Since = None,
    pod: PodName = None,
    follow: Follow = False,
) -> Response[Any]:
    project = caller.require_project()
    with follow_slot(request, caller.actor, project.id, follow) as (follows, held):
        async with db.connection() as conn:
            service_id = await services.get_id(conn, project, name)
        kube: KubeClient | None = request.app.state.get("kube")
        if kube is None:
            raise NotFound(f"Service {name!r} has no pods: this server runs without Kubernetes.")
        namespace = namespace_for(project.name)
        pods = await _replicas(kube, namespace, name, str(service_id))
        if pod is not None:
            pods = [found for found in pods if found["metadata"]["name"] == pod]
            if not pods:
                raise NotFound(f"Service {name!r} has no replica pod {pod!r}.")
        if not pods:
            raise NotFound(
                f"Service {name!r} has no replica pods yet: logs appear once its replicas start."
            )
        several = len(pods) > 1
        chosen = [(found, f"[{found['metadata']['name']}] " if several else "") for found in pods]
        read = LogRead(MAIN_CONTAINER, tail, since_seconds)
        if follow:
            running = [(str(p["metadata"]["name"]), label) for p, label in chosen if started(p)]
            if not running:
                raise NotFound(f"No replica of service {name!r} has started yet.")
            return follow_stream(request, follows, held, kube, namespace, running, read)
        body = await joined_text(kube, namespace, chosen, read)
        return Response(body, media_type="text/plain; charset=utf-8")


ROUTES = [get_service_logs]
