"""``/healthz`` (the process lives), ``/readyz`` (it can serve), ``/metrics`` (Prometheus).

``/healthz`` asks the process supervisor (``app.supervision``, through the ``liveness``
callable of ``ApiDependencies``): once a long-lived part has died or has not recovered in
time, it answers 503 with the reason while the process shuts down and exits.
"""

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from litestar import Request, Response, get

from app.api import shutdown
from app.observability import metrics

if TYPE_CHECKING:
    from app.store.db import Database

ReadinessCheck = Callable[[], Awaitable[str | None]]
"""Returns None when ready, or a sentence saying why not (e.g. "informers not synced")."""


@get(
    "/healthz",
    include_in_schema=True,
    summary="Liveness",
    tags=["operations"],
    description="200 while every long-lived part of the process (HTTP server, reconcile "
    "engine, informers, purge) runs; 503 with the reason once one has died or has not "
    "recovered within `AICP_RECOVERY_TIMEOUT_SECONDS`: the process is then about to exit.",
)
async def healthz(request: Request[Any, Any, Any]) -> Response[dict[str, str]]:
    liveness: Callable[[], str | None] | None = request.app.state.get("liveness")
    failure = liveness() if liveness is not None else None
    if failure is not None:
        return Response({"status": "failing", "reason": failure}, status_code=503)
    return Response({"status": "ok"}, status_code=200)


@get(
    "/readyz",
    summary="Readiness",
    tags=["operations"],
    description="200 when the database answers and every registered check passes (the "
    "reconciler registers 'informers synced'); else 503 with the reasons.",
)
async def readyz(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
    reasons: list[str] = []
    if shutdown.is_stopping(request.app):
        reasons.append("shutting down")
    db: Database = request.app.state["db"]
    if not await db.ping():
        reasons.append("database is not reachable")
    checks: list[ReadinessCheck] = request.app.state.get("readiness_checks", [])
    for check in checks:
        reason = await check()
        if reason:
            reasons.append(reason)
    if reasons:
        return Response(
            {"status": "unavailable", "reasons": reasons},
            status_code=503,
            headers={"Retry-After": "1"},
        )
    return Response({"status": "ready", "reasons": []}, status_code=200)


@get(
    "/metrics",
    summary="Prometheus metrics",
    tags=["operations"],
    description="Prometheus text format: HTTP, reconcile, watch, lease and lifecycle metrics.",
    media_type=metrics.CONTENT_TYPE,
    operation_id="getMetrics",
)
async def metrics_endpoint() -> Response[bytes]:
    return Response(metrics.render(), media_type=metrics.CONTENT_TYPE)
