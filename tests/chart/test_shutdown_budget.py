"""The chart's termination grace period leaves the service its whole shutdown.

On SIGTERM the service drains HTTP requests, then lets reconcile steps in flight finish, then
releases its leases; `app.main` gives each phase `SHUTDOWN_GRACE_SECONDS`. The chart assumes
the two together take at most 20 s; a kill before the release delays takeover by a peer from
"at once" to lease TTL + sweep interval.
"""

from __future__ import annotations

from app.main import SHUTDOWN_GRACE_SECONDS
from tests.chart.rendering import DEFAULT_VALUES, render

CHART_ASSUMED_SERVICE_GRACE = 20


def test_the_services_shutdown_fits_the_grace_the_chart_assumes() -> None:
    http_drain = steps_drain = SHUTDOWN_GRACE_SECONDS

    assert http_drain + steps_drain <= CHART_ASSUMED_SERVICE_GRACE


def test_kubernetes_waits_for_the_pre_stop_sleep_and_the_whole_shutdown() -> None:
    rendered = render(DEFAULT_VALUES)
    pod = rendered.one("Deployment")["spec"]["template"]["spec"]
    pre_stop = rendered.container["lifecycle"]["preStop"]["sleep"]["seconds"]

    assert pod["terminationGracePeriodSeconds"] > pre_stop + CHART_ASSUMED_SERVICE_GRACE
