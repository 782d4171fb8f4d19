"""Every setting the service reads is either a chart value or documented as `config.extraEnv`.

The settings are the variable names `app/config.py` reads; the documentation is the table of
docs/OPERATIONS.md's "### Settings". A new setting fails here, by name, until the table (and,
for a chart value, values.yaml, values.schema.json and the Deployment) says how to set it.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.chart.rendering import CHART_DIR, DEFAULT_VALUES, render
from tests.chart.test_operations_doc import section, table_rows

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "app" / "config.py"
EXTRA_ENV = "`config.extraEnv`"


def service_settings() -> set[str]:
    """The environment variables `app/config.py` reads (every quoted `AICP_…` name and the two
    unprefixed ones it takes from the environment)."""
    return set(re.findall(r'"(AICP_[A-Z0-9_]+|DATABASE_URL|KUBECONFIG)"', CONFIG.read_text()))


def documented() -> dict[str, str]:
    """variable -> how the chart sets it, from the OPERATIONS.md settings table."""
    text = section("Install").split("\n### Settings\n", 1)[1].split("\n### ", 1)[0]
    rows = {}
    for cells in table_rows(text):
        names = re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0])
        rows.update(dict.fromkeys(names, cells[-1]))
    return rows


def chart_config_keys() -> set[str]:
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    return set(values["config"]) - {"extraEnv"}


def test_every_setting_the_service_reads_is_in_the_operations_settings_table() -> None:
    missing = sorted(service_settings() - set(documented()))

    assert missing == [], (
        f"settings read in app/config.py but not in docs/OPERATIONS.md '### Settings': {missing}."
        " Add a row for each: a chart value (config.<key> in values.yaml, values.schema.json"
        f" and templates/deployment.yaml) or {EXTRA_ENV}"
    )
    stale = sorted(set(documented()) - service_settings())
    assert stale == [], f"in docs/OPERATIONS.md '### Settings' but not read by the service: {stale}"


def test_settings_with_a_chart_value_reach_the_container_and_the_others_are_extra_env() -> None:
    env = render(DEFAULT_VALUES).env
    keys = chart_config_keys()

    for name, how in sorted(documented().items()):
        if how == EXTRA_ENV:
            assert name not in env, (
                f"{name} is set by the chart, but docs/OPERATIONS.md says {EXTRA_ENV}:"
                " name its chart value there"
            )
            continue
        if how.startswith("not set"):
            assert name not in env, name
            continue
        assert name in env, f"{name}: docs/OPERATIONS.md says {how!r}, the Deployment has none"
        named = set(re.findall(r"`config\.([A-Za-z]+)(?:\.[A-Za-z]+)*`", how))
        assert named <= keys, f"{name}: {sorted(named - keys)} not in values.yaml config"


def test_every_chart_config_value_is_documented_with_its_variable() -> None:
    named = {
        key
        for how in documented().values()
        for key in re.findall(r"`config\.([A-Za-z]+)(?:\.[A-Za-z]+)*`", how)
    }

    assert sorted(chart_config_keys() - named) == [], "config.* values not in the settings table"


def test_a_setting_passed_as_extra_env_reaches_the_container_as_given() -> None:
    extra = [{"name": name, "value": "7"} for name, how in documented().items() if how == EXTRA_ENV]
    assert extra

    env = render({**DEFAULT_VALUES, "config": {"extraEnv": extra}}).env

    for entry in extra:
        assert env[entry["name"]] == entry
