"""`?name_contains=`: a workload list (and its stream) narrowed to names containing a text,
case-insensitive, with `%` and `_` plain characters rather than wildcards."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.scenario import POOL, WORKLOADS, Scenario
from tests.support.sse import open_stream

pytestmark = pytest.mark.timeout(30)


def names(response: Any) -> list[str]:
    assert response.status_code == 200, response.text
    return [w["name"] for w in response.json()["items"]]


async def test_the_list_keeps_the_names_containing_the_text_in_any_case(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.create_pool("cpu-pool")
    for name in ("train-7b", "eval-7b", "abc", "pretrain-70b"):
        await api.submit(name, accelerators=0)
    await api.submit("train-cpu", compute_pool="cpu-pool", accelerators=0)
    await api.client.delete(f"{WORKLOADS}/eval-7b")

    def listed(**params: Any) -> Any:
        return api.client.get(WORKLOADS, params=params)

    assert names(await listed(name_contains="TRAIN")) == ["train-cpu", "pretrain-70b", "train-7b"]
    assert names(await listed(name_contains="7b")) == ["eval-7b", "train-7b"]
    assert names(await listed(name_contains="7b", state="PENDING")) == ["train-7b"]
    assert names(await listed(name_contains="train", compute_pool="cpu-pool")) == ["train-cpu"]
    both = await listed(name_contains="train", compute_pool=POOL, state="PENDING")
    assert names(both) == ["pretrain-70b", "train-7b"]
    # Not wildcards: `%` would match every name, `a_c` would match "abc".
    assert names(await listed(name_contains="%")) == []
    assert names(await listed(name_contains="a_c")) == []
    assert names(await listed(name_contains="\\")) == []


async def test_pages_of_a_name_filtered_list_hold_only_matches_and_keep_the_filter(
    api: Scenario,
) -> None:
    await api.setup_pool(wait=False)
    for i in range(5):
        await api.submit(f"keep-{i}", accelerators=0)
        await api.submit(f"skip-{i}", accelerators=0)
    first = (await api.client.get(WORKLOADS, params={"name_contains": "keep", "limit": 3})).json()
    assert [w["name"] for w in first["items"]] == ["keep-4", "keep-3", "keep-2"]
    params = {"name_contains": "keep", "limit": 3, "cursor": first["next_cursor"]}
    second = (await api.client.get(WORKLOADS, params=params)).json()
    assert [w["name"] for w in second["items"]] == ["keep-1", "keep-0"]
    assert second["next_cursor"] is None
    # The cursor belongs to the filtered list: with another text it is refused.
    params = {"name_contains": "skip", "cursor": first["next_cursor"]}
    other = await api.client.get(WORKLOADS, params=params)
    assert other.status_code == 422 and other.json()["errors"][0]["field"] == "cursor"


async def test_a_too_long_or_empty_text_is_refused_naming_the_parameter(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    for text in ("x" * 41, ""):
        response = await api.client.get(WORKLOADS, params={"name_contains": text})
        assert response.status_code == 422, response.text
        assert [e["field"] for e in response.json()["errors"]] == ["name_contains"]
    assert names(await api.client.get(WORKLOADS, params={"name_contains": "x" * 40})) == []


async def test_a_name_filtered_stream_sends_only_matching_workloads(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.submit("train-a", accelerators=0)
    await api.submit("eval-a", accelerators=0)
    params = {"watch": "true", "name_contains": "Train"}
    async with open_stream(api.client, WORKLOADS, params=params) as stream:
        first = await stream.next()
        assert (first.type, first.object["name"]) == ("ADDED", "train-a")
        await api.submit("eval-b", accelerators=0)
        await api.submit("train-b", accelerators=0)
        live = await stream.next()
        assert (live.type, live.object["name"]) == ("ADDED", "train-b")
