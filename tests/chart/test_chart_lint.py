"""`helm lint --strict` passes for every values set CI installs with."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest

from tests.chart.rendering import CHART_DIR, DEFAULT_VALUES, EXISTING_SECRET_VALUES, HA_VALUES

VALUE_SETS = [
    pytest.param(DEFAULT_VALUES, id="default"),
    pytest.param(HA_VALUES, id="ha-3-replicas"),
    pytest.param(EXISTING_SECRET_VALUES, id="existing-secret"),
]


@pytest.mark.parametrize("values", VALUE_SETS)
def test_the_chart_lints_clean_in_strict_mode(values: dict[str, Any]) -> None:
    report = helm.lint(CHART_DIR, values, strict=True, namespace="aicp-system")

    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert report["errors"] == []
    assert problems == []
    assert report["total_charts_linted"] == 1
