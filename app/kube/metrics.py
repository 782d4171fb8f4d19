"""Prometheus metrics of the Kubernetes adapter (API.md "Operations": watch events and restarts
by kind and reason). Registered in the default registry, which `/metrics` exposes."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

WATCH_EVENTS = Counter(
    "aicp_watch_events_total",
    "Watch events applied to the informer caches, by kind and event type "
    "(synthesized relist events included).",
    ["kind", "type"],
)
WATCH_RESTARTS = Counter(
    "aicp_watch_restarts_total",
    "Times an informer opened a new list or watch, by kind and why: closed (the stream ended), "
    "gone (410, relist), unavailable, throttled, error.",
    ["kind", "reason"],
)
INFORMER_SYNCED = Gauge(
    "aicp_informer_synced",
    "1 once the informer's first list has been applied to its cache, by kind.",
    ["kind"],
)
KUBE_WRITES = Counter(
    "aicp_kube_writes_total",
    "Writes sent to the Kubernetes API by verb and kind, and their outcome (ok or the error).",
    ["verb", "kind", "outcome"],
)
