"""Every Prometheus metric aicp exports (docs/API.md "Operations"), in one registry.

Every metric lives in this one registry. The service-wide ones are declared here, including
those only the reconciler updates; the two specific to the Kubernetes adapter are declared in
``app.kube.metrics`` on the same registry, so ``/metrics`` shows the whole service either way.
Label values must come from small fixed sets (route templates, kinds, states), never from user
input.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

REGISTRY = CollectorRegistry(auto_describe=True)

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_LIFECYCLE_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600)

# --- HTTP -------------------------------------------------------------------------------------
HTTP_REQUESTS = Counter(
    "aicp_http_requests_total",
    "HTTP requests answered, by route template, method and status code.",
    ["route", "method", "status"],
    registry=REGISTRY,
)
HTTP_LATENCY = Histogram(
    "aicp_http_request_duration_seconds",
    "Time from request received to response sent, by route template, method and status code.",
    ["route", "method", "status"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
VALIDATION_ERRORS = Counter(
    "aicp_validation_errors_total",
    "Fields rejected with 422 validation-error, by field path (unknown fields counted as "
    "'(unknown field)').",
    ["field"],
    registry=REGISTRY,
)

RATE_LIMITED = Counter(
    "aicp_rate_limited_total",
    "Requests answered 429 too-many-requests, by the limit they hit (token-reads, "
    "token-writes, project-reads, project-writes, client-auth-failures).",
    ["limit"],
    registry=REGISTRY,
)
AUTH_FAILURES = Counter(
    "aicp_auth_failures_total",
    "Requests answered 401, by how the token was judged (malformed: refused by its form, no "
    "database read; known-bad: in this replica's cache of rejected tokens, no read; looked-up: "
    "read from the database).",
    ["check"],
    registry=REGISTRY,
)

# --- Streams (server-sent events) -------------------------------------------------------------
STREAMS_OPEN = Gauge(
    "aicp_streams_open",
    "Live streams (watches of workloads and services) open on this replica.",
    registry=REGISTRY,
)
STREAM_EVENTS = Counter(
    "aicp_stream_events_total",
    "Events queued to open streams (one per stream per change it shows).",
    registry=REGISTRY,
)
STREAM_DROPS = Counter(
    "aicp_stream_drops_total",
    "Streams refused or closed by the server, by reason (limit: 429 at open; slow: the client "
    "fell too far behind; revoked: its token stopped authenticating; project_deleted: its "
    "project is being deleted).",
    ["reason"],
    registry=REGISTRY,
)

LOG_FOLLOWS_OPEN = Gauge(
    "aicp_log_follows_open",
    "Log follows (`logs?follow=true`) open on this replica, each holding one connection of "
    "its own pool to the Kubernetes API.",
    registry=REGISTRY,
)

# --- Reconciler -------------------------------------------------------------------------------
RECONCILE_TOTAL = Counter(
    "aicp_reconcile_total",
    "Reconcile steps run, by resource kind and result (done, requeue, error, terminal).",
    ["kind", "result"],
    registry=REGISTRY,
)
RECONCILE_DURATION = Histogram(
    "aicp_reconcile_duration_seconds",
    "Duration of one reconcile step, by resource kind.",
    ["kind"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
RECONCILE_ERRORS = Counter(
    "aicp_reconcile_errors_total",
    "Reconcile steps that raised, by resource kind and error class.",
    ["kind", "error"],
    registry=REGISTRY,
)
RECONCILE_LAG = Gauge(
    "aicp_reconcile_lag_seconds",
    "Age of the oldest resource that needs work, by resource kind.",
    ["kind"],
    registry=REGISTRY,
)
LEASES_HELD = Gauge(
    "aicp_leases_held",
    "Resource leases held by this replica, by resource kind.",
    ["kind"],
    registry=REGISTRY,
)
WATCH_EVENTS = Counter(
    "aicp_watch_events_total",
    "Kubernetes watch events received, by object kind and event type.",
    ["kind", "type"],
    registry=REGISTRY,
)
WATCH_RESTARTS = Counter(
    "aicp_watch_restarts_total",
    "Watch streams restarted, by object kind and reason (ended, gone, error).",
    ["kind", "reason"],
    registry=REGISTRY,
)
DRIFT_CORRECTIONS = Counter(
    "aicp_drift_corrections_total",
    "Managed Kubernetes objects restored after someone changed or deleted them, by object kind.",
    ["kind"],
    registry=REGISTRY,
)
WORKLOADS_BY_STATE = Gauge(
    "aicp_workloads",
    "Workloads by state (live states recounted every 15 s, SUCCEEDED and FAILED every 5 min).",
    ["state"],
    registry=REGISTRY,
)
TIME_TO_JOB_CREATED = Histogram(
    "aicp_workload_accepted_to_job_created_seconds",
    "Time from a workload being accepted to its Job being created.",
    buckets=_LIFECYCLE_BUCKETS,
    registry=REGISTRY,
)
TIME_TO_ADMITTED = Histogram(
    "aicp_workload_accepted_to_admitted_seconds",
    "Time from a workload being accepted to Kueue admitting it.",
    buckets=_LIFECYCLE_BUCKETS,
    registry=REGISTRY,
)
TIME_TO_RUNNING = Histogram(
    "aicp_workload_accepted_to_running_seconds",
    "Time from a workload being accepted to its pods running.",
    buckets=_LIFECYCLE_BUCKETS,
    registry=REGISTRY,
)
FORECAST_ERROR = Histogram(
    "aicp_forecast_error_seconds",
    "How far Kueue's admission of a queued workload fell from the estimate's likely (p50) "
    "time, in absolute seconds, per scored estimate (docs/PLANNING.md).",
    buckets=(5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400),
    registry=REGISTRY,
)
FORECAST_STARTS = Counter(
    "aicp_forecast_starts_total",
    "Scored estimates of queued workloads, by whether the admission fell inside the "
    "estimate's band (earliest to latest): inside=true or false.",
    ["inside"],
    registry=REGISTRY,
)
STUCK_DELETING = Gauge(
    "aicp_resources_stuck_deleting",
    "Resources whose deletion was requested more than a minute ago and is not finished, by kind.",
    ["kind"],
    registry=REGISTRY,
)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def render() -> bytes:
    """The registry in Prometheus text format."""
    return generate_latest(REGISTRY)
