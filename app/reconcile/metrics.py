"""The engine's Prometheus metrics, defined in `app.observability.metrics` and updated here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.observability.metrics import (
    LEASES_HELD,
    RECONCILE_DURATION,
    RECONCILE_ERRORS,
    RECONCILE_LAG,
    RECONCILE_TOTAL,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from app.domain.kinds import Kind


class PrometheusObserver:
    """Reports steps, leases held and lag to the service's registry (an `EngineObserver`)."""

    def step_finished(self, kind: Kind, result: str, seconds: float, error: str | None) -> None:
        RECONCILE_TOTAL.labels(kind=kind, result=result).inc()
        RECONCILE_DURATION.labels(kind=kind).observe(seconds)
        if error is not None:
            RECONCILE_ERRORS.labels(kind=kind, error=error).inc()

    def leases_held(self, counts: Mapping[Kind, int]) -> None:
        for kind, count in counts.items():
            LEASES_HELD.labels(kind=kind).set(count)

    def lag(self, seconds: Mapping[Kind, float]) -> None:
        for kind, value in seconds.items():
            RECONCILE_LAG.labels(kind=kind).set(value)
