"""The Litestar application factory: routes, the auth guard, body checks, the one exception
handler, OpenAPI at ``/schema/openapi.json``, wrapped in the observability ASGI layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from litestar import Litestar, Router
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme

from app.api import (
    bindings,
    creating,
    dashboard,
    events,
    forecasts,
    pools,
    projects,
    role_bindings,
    service_views,
    services,
    shutdown,
    sign_on,
    tokens,
    watches,
    workload_views,
    workloads,
)
from app.api.api_docs import swagger_assets, swagger_plugin
from app.api.auth import LIMITER_KEY, REJECTED_KEY, authorize
from app.api.bodies import check_body
from app.api.deps import caller_provider, database_provider, paging_provider
from app.api.docs import describe_components, short_operation_id
from app.api.health import ReadinessCheck, healthz, metrics_endpoint, readyz
from app.api.methods import MethodSemantics
from app.api.observe import Observed
from app.api.paging import Paging
from app.api.people import SIGN_ON_KEY
from app.api.problems import problem_response
from app.api.ratelimit import RateLimiter
from app.api.validation import MAX_BODY_BYTES
from app.config import DEFAULT_TOKENS_PER_PROJECT
from app.domain.naming import DEFAULT_INSTALL_NAMESPACE
from app.domain.specs import DEFAULT_START_DEADLINE_SECONDS
from app.store.token_cache import RejectedTokens
from app.streams import follows

if TYPE_CHECKING:
    from collections.abc import Callable

    from litestar.types import ASGIApp

    from app.api.people import SignOn
    from app.api.ratelimit import RateLimits
    from app.domain.node_fit import NodeSource
    from app.kube.client import KubeClient
    from app.reconcile.engine import Reconciler
    from app.store.db import Database
    from app.store.token_cache import TokenCache
    from app.streams.changefeed import ChangeFeed
    from app.streams.follows import FollowLimits

API_PREFIX = "/api/v1"


@dataclass
class ApiDependencies:
    """What the HTTP layer needs from the composition root."""

    db: Database
    admin_token: str | None
    readiness_checks: list[ReadinessCheck] = field(default_factory=list)
    kube: KubeClient | None = None  # for the one live read (pod logs); None: no pods, 404
    # This replica's engine: creates lease the new resource in their own transaction and queue
    # it locally, instead of ringing the doorbell (docs/DESIGN.md §5). None: creates ring.
    reconciler: Reconciler | None = None
    # `/healthz`: None while every long-lived part of the process lives, else why not.
    liveness: Callable[[], str | None] | None = None
    # Project tokens seen valid, dropped on every token change (app/store/token_cache.py).
    # None: every request reads its token from the database.
    token_cache: TokenCache | None = None
    feed: ChangeFeed | None = None  # the live streams; None: they answer 404
    tokens_per_project: int = DEFAULT_TOKENS_PER_PROJECT  # live tokens a project may hold
    # Request rate limits of this replica (app/api/ratelimit.py); None: no limits.
    rate_limits: RateLimits | None = None
    # Log follows open at once (app/streams/follows.py); None: no limits.
    follow_limits: FollowLimits | None = None
    # The namespace aicp runs in: the project name that maps onto it is reserved.
    install_namespace: str = DEFAULT_INSTALL_NAMESPACE
    # The start deadline filled into a workload spec that names none.
    workload_start_deadline_seconds: int = DEFAULT_START_DEADLINE_SECONDS
    # Single sign-on: the OpenID Connect issuer's verifier and role bootstrap; None: API
    # tokens only (a bearer JWT is 401).
    sign_on: SignOn | None = None
    # The cluster's nodes as the Node informer sees them (None: no cluster): a workload pod no
    # node of its accelerator class can hold is 422 exceeds-node-capacity at submit.
    nodes: NodeSource | None = None


def _resource_routes() -> list[Any]:
    """Every ``/api/v1`` handler: each resource module lists its own in ``ROUTES``."""
    return [
        *projects.ROUTES,
        *tokens.ROUTES,
        *bindings.ROUTES,
        *role_bindings.ROUTES,
        *sign_on.ROUTES,
        *pools.ROUTES,
        *forecasts.ROUTES,
        *workloads.ROUTES,
        *services.ROUTES,
        *service_views.ROUTES,
        *events.ROUTES,
        *workload_views.ROUTES,
    ]


def _openapi_config() -> OpenAPIConfig:
    """The OpenAPI document's title, description, security scheme and renderers (`/schema`)."""
    return OpenAPIConfig(
        title="aicp",
        version="1.0.0",
        description="AI compute control plane: projects, accelerator bindings, compute "
        "pools and GPU batch workloads on Kubernetes with Kueue. Errors are RFC 9457 "
        "problems (`application/problem+json`).",
        path="/schema",
        operation_id_creator=short_operation_id,
        render_plugins=[JsonRenderPlugin(), swagger_plugin()],
        components=Components(
            security_schemes={
                "bearer": SecurityScheme(
                    type="http",
                    scheme="bearer",
                    description="The platform admin token, a project token (`aicp_...`), or an "
                    "OpenID Connect access token of the configured issuer (a JWT).",
                )
            }
        ),
    )


def create_app(deps: ApiDependencies) -> Litestar:
    """The Litestar application (without the outer observability layer; see ``asgi_app``)."""

    api = Router(
        path=API_PREFIX,
        route_handlers=_resource_routes(),
        guards=[authorize],
        before_request=check_body,
        security=[{"bearer": []}],
    )
    app = Litestar(
        route_handlers=[
            api,
            *dashboard.routes(),
            healthz,
            readyz,
            metrics_endpoint,
            swagger_assets(),
        ],
        dependencies={
            "db": database_provider(deps.db),
            "caller": caller_provider(),
            "paging": paging_provider(Paging(deps.admin_token)),
        },
        exception_handlers={Exception: problem_response},
        request_max_body_size=MAX_BODY_BYTES,
        openapi_config=_openapi_config(),
        debug=False,
        # Logging is configured once by the process entry point (app.observability.logs).
        logging_config=None,
    )
    app.state["db"] = deps.db
    app.state["admin_token"] = deps.admin_token
    app.state["readiness_checks"] = deps.readiness_checks
    app.state["liveness"] = deps.liveness
    app.state["kube"] = deps.kube
    app.state["token_cache"] = deps.token_cache
    app.state[SIGN_ON_KEY] = deps.sign_on
    app.state[tokens.TOKENS_PER_PROJECT_KEY] = deps.tokens_per_project
    app.state[creating.STATE_KEY] = deps.reconciler
    app.state[watches.STATE_KEY] = deps.feed
    shutdown.install(app)
    app.state[LIMITER_KEY] = None if deps.rate_limits is None else RateLimiter(deps.rate_limits)
    app.state[REJECTED_KEY] = RejectedTokens()
    app.state[follows.STATE_KEY] = (
        None if deps.follow_limits is None else follows.Follows(deps.follow_limits)
    )
    app.state["install_namespace"] = deps.install_namespace
    app.state[workloads.START_DEADLINE_KEY] = deps.workload_start_deadline_seconds
    app.state[workloads.NODES_KEY] = deps.nodes
    describe_components(app)
    return app


def asgi_app(app: Litestar) -> ASGIApp:
    """What uvicorn serves: the application inside the request-id/metrics layer."""
    return Observed(MethodSemantics(app))
