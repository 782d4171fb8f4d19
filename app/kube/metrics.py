"""Metrics of the Kubernetes adapter.

Watch events and restarts are the service-wide metrics of `app.observability.metrics`
(docs/API.md "Operations"). Restart reasons used here: `ended` (the stream closed: server timeout
or a dropped connection; resumed from the last version), `gone` (410, relisted),
`unavailable` (5xx or no connection), `throttled` (429) and `error` (anything else). The two
below are specific to this package and live in the same registry, so `/metrics` shows them.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from app.observability.metrics import REGISTRY, WATCH_EVENTS, WATCH_RESTARTS

__all__ = ["INFORMER_SYNCED", "KUBE_WRITES", "WATCH_EVENTS", "WATCH_RESTARTS"]

INFORMER_SYNCED = Gauge(
    "aicp_informer_synced",
    "1 once the informer's first list is in its cache, by object kind.",
    ["kind"],
    registry=REGISTRY,
)
KUBE_WRITES = Counter(
    "aicp_kube_writes_total",
    "Writes sent to the Kubernetes API, by verb, object kind and outcome (ok or the error class).",
    ["verb", "kind", "outcome"],
    registry=REGISTRY,
)
