"""A workload's start deadline over HTTP: the installation's default fills a spec that names
none (AICP_WORKLOAD_START_DEADLINE_SECONDS), one the spec names is kept, on submit and replace."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.pg_fixtures import serving
from tests.support.scenario import WORKLOADS, Scenario, example_workload

DEFAULT = 120


def without_deadline(name: str) -> dict[str, object]:
    body = example_workload(name)
    del body["start_deadline_seconds"]
    return body


@pytest.fixture
async def api_with_default(database_url: str) -> AsyncIterator[Scenario]:
    async with serving(database_url, workload_start_deadline_seconds=DEFAULT) as api:
        yield api


async def test_a_spec_without_a_start_deadline_gets_the_installations_default(
    api_with_default: Scenario,
) -> None:
    api = api_with_default
    await api.setup_pool(wait=False)
    submitted = await api.client.post(WORKLOADS, json=without_deadline("plain"))
    assert submitted.status_code == 202, submitted.text
    assert submitted.json()["spec"]["start_deadline_seconds"] == DEFAULT

    named = await api.client.post(
        WORKLOADS, json=example_workload("named", start_deadline_seconds=30)
    )
    assert named.status_code == 202, named.text
    assert named.json()["spec"]["start_deadline_seconds"] == 30

    # A replacement that names none gets the default again; one that names one keeps it.
    replaced = await api.client.put(
        f"{WORKLOADS}/named", json=example_workload("named", start_deadline_seconds=None)
    )
    assert replaced.status_code == 202, replaced.text
    assert replaced.json()["spec"]["start_deadline_seconds"] == DEFAULT
    fetched = await api.client.get(f"{WORKLOADS}/named")
    assert fetched.json()["spec"]["start_deadline_seconds"] == DEFAULT
