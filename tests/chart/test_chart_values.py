"""values.schema.json and the templates' own checks turn a bad install into a clear error."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest

from tests.chart.rendering import DATABASE_URL, render

DB = {"databaseUrl": DATABASE_URL}

INVALID = [
    pytest.param({"secret": DB, "replicas": 3}, "additional properties 'replicas'", id="typo"),
    pytest.param({"secret": DB, "replicaCount": "3"}, "/replicaCount", id="replicas-as-string"),
    pytest.param(
        {"secret": DB, "config": {"logFormat": "xml"}}, "/config/logFormat", id="log-format"
    ),
    pytest.param({"secret": DB, "config": {"workers": 0}}, "/config/workers", id="zero-workers"),
    pytest.param(
        {"secret": {"databaseUrl": "mysql://db/aicp"}}, "/secret/databaseUrl", id="not-postgres"
    ),
    pytest.param({"secret": {**DB, "adminToken": "short"}}, "/secret/adminToken", id="weak-token"),
    pytest.param(
        {"secret": DB, "terminationGracePeriodSeconds": 10},
        "/terminationGracePeriodSeconds",
        id="grace-shorter-than-the-service-needs",
    ),
    pytest.param(
        {"secret": DB, "image": {"repository": "aicp", "digest": "latest"}},
        "/image/digest",
        id="digest-not-sha256",
    ),
    pytest.param(
        {"secret": DB, "networkPolicy": {"egress": {"database": {"cidrs": ["10.0.0.0"]}}}},
        "/networkPolicy/egress/database/cidrs/0",
        id="cidr-without-prefix",
    ),
]


@pytest.mark.parametrize(("values", "complaint"), INVALID)
def test_invalid_values_are_rejected_naming_the_bad_key(
    values: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(helm.HelmValuesError) as failure:
        render(values)

    assert complaint in str(failure.value)


def test_an_install_without_any_database_fails_with_a_message_saying_what_to_set() -> None:
    with pytest.raises(helm.HelmRenderError) as failure:
        render({})

    assert "set secret.databaseUrl, or secret.existingSecret" in str(failure.value)


def test_a_grace_period_that_leaves_no_time_after_the_pre_stop_sleep_is_rejected() -> None:
    values = {"secret": DB, "terminationGracePeriodSeconds": 25, "preStopSleepSeconds": 10}

    with pytest.raises(helm.HelmRenderError) as failure:
        render(values)

    assert "must be longer than preStopSleepSeconds" in str(failure.value)
    assert "more than 30" in str(failure.value)
