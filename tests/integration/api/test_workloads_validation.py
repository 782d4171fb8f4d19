"""Every rule docs/API.md sets on workload bodies, checked over HTTP: the 422 names each bad field.

Each table runs against one service (starting one per case would dominate the suite's time);
a failure names the case.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.problems import assert_problem
from tests.support.scenario import CLASS, POOL, WORKLOADS, Scenario, example_workload

SCHEMA_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("unknown field replica", {"replica": 2}, ["replica"]),
    ("two unknown fields", {"gpus": 1, "mem": "1Gi"}, ["gpus", "mem"]),
    ("accelerators as string", {"accelerators": "8"}, ["accelerators"]),
    ("accelerators 65", {"accelerators": 65}, ["accelerators"]),
    ("accelerators negative", {"accelerators": -1}, ["accelerators"]),
    ("replicas 0", {"replicas": 0}, ["replicas"]),
    ("replicas 65", {"replicas": 65}, ["replicas"]),
    ("runtime 59 s", {"max_runtime_seconds": 59}, ["max_runtime_seconds"]),
    ("runtime 30 d + 1 s", {"max_runtime_seconds": 30 * 86400 + 1}, ["max_runtime_seconds"]),
    ("start deadline 0 s", {"start_deadline_seconds": 0}, ["start_deadline_seconds"]),
    (
        "start deadline 30 d + 1 s",
        {"start_deadline_seconds": 30 * 86400 + 1},
        ["start_deadline_seconds"],
    ),
    ("start deadline as string", {"start_deadline_seconds": "5m"}, ["start_deadline_seconds"]),
    ("retries 11", {"retries": 11}, ["retries"]),
    ("nodes 0", {"nodes": 0}, ["nodes"]),
    ("nodes 65", {"nodes": 65}, ["nodes"]),
    ("priority urgent", {"priority": "urgent"}, ["priority"]),
    ("env 65 entries", {"env": {f"K{i}": "v" for i in range(65)}}, ["env"]),
    ("env key with dash", {"env": {"A-B": "x"}}, ["env"]),
    ("labels 17", {"labels": {f"k{i}": "v" for i in range(17)}}, ["labels"]),
    ("image with space", {"image": "my image"}, ["image"]),
    ("image 513 chars", {"image": "i" * 513}, ["image"]),
    ("command 65 items", {"command": ["x"] * 65}, ["command"]),
    ("args as string", {"args": "--epochs 3"}, ["args"]),
    ("cpu as number", {"cpu": 4}, ["cpu"]),
    ("name 41 chars", {"name": "n" * 41}, ["name"]),
    ("name uppercase", {"name": "Train"}, ["name"]),
    ("name with underscore", {"name": "train_7b"}, ["name"]),
    ("pool name 31 chars", {"compute_pool": "p" * 31}, ["compute_pool"]),
    ("several at once", {"replicas": 0, "retries": 99, "typo": 1}, ["replicas", "retries", "typo"]),
]

RULE_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("reserved prefix aicp-", {"name": "aicp-train"}, ["name"]),
    ("reserved prefix kube-", {"name": "kube-train"}, ["name"]),
    ("reserved prefix system-", {"name": "system-train"}, ["name"]),
    ("cpu not a quantity", {"cpu": "four"}, ["cpu"]),
    ("cpu zero", {"cpu": "0"}, ["cpu"]),
    ("memory with SI-byte suffix", {"memory": "16GB"}, ["memory"]),
    ("memory negative", {"memory": "-1Gi"}, ["memory"]),
    ("env reserved AICP_ prefix", {"env": {"AICP_TOKEN": "x"}}, ["env.AICP_TOKEN"]),
    ("label key bad", {"labels": {"-team": "nlp"}}, ["labels.-team"]),
    ("label value bad", {"labels": {"team": "n lp"}}, ["labels.team"]),
    ("label prefix reserved", {"labels": {"aicp.dev/uid": "x"}}, ["labels.aicp.dev/uid"]),
    ("nodes with replicas", {"nodes": 2, "replicas": 2, "accelerators": 1}, ["replicas"]),
    (
        "a rendezvous variable in a multi-node env",
        {"nodes": 2, "accelerators": 1, "env": {"MASTER_ADDR": "x", "WORLD_SIZE": "2"}},
        ["env.MASTER_ADDR", "env.WORLD_SIZE"],
    ),
    (
        "every rule at once",
        {"name": "kube-x", "cpu": "fast", "env": {"AICP_X": "1"}},
        ["name", "cpu", "env.AICP_X"],
    ),
]


async def _check_table(
    client: httpx.AsyncClient, cases: list[tuple[str, dict[str, Any], list[str]]]
) -> None:
    for case, changes, fields in cases:
        response = await client.post(WORKLOADS, json={**example_workload("w"), **changes})
        assert response.status_code == 422, (case, response.text)
        problem = response.json()
        assert response.headers["content-type"].startswith("application/problem+json"), case
        assert problem["type"] == "https://aicp.dev/problems/validation-error", case
        assert sorted(e["field"] for e in problem["errors"]) == sorted(fields), (case, problem)
        assert all(e["message"] for e in problem["errors"]), case


async def test_schema_violations_are_422_naming_each_field(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await _check_table(api.client, SCHEMA_CASES)
    assert (await api.client.get(WORKLOADS)).json()["items"] == []


async def test_rules_beyond_the_schema_are_422_naming_each_field(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await _check_table(api.client, RULE_CASES)
    assert (await api.client.get(WORKLOADS)).json()["items"] == []


async def test_the_unknown_field_message_says_so(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    response = await api.client.post(WORKLOADS, json=example_workload(replica=2))
    assert response.json()["errors"] == [{"field": "replica", "message": "unknown field"}]


async def test_missing_required_fields_are_each_named(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    response = await api.client.post(WORKLOADS, json={"accelerators": 1})
    assert response.status_code == 422
    fields = sorted(e["field"] for e in response.json()["errors"])
    assert fields == ["compute_pool", "image", "name"]


async def test_bounds_are_inclusive(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.create_pool("big", quota={"accelerators": 4096, "cpu": "100000", "memory": "1Pi"})
    edges = [
        {"accelerators": 64, "replicas": 64, "compute_pool": "big"},
        {"max_runtime_seconds": 60, "retries": 10, "priority": "low"},
        {"max_runtime_seconds": 30 * 86400, "priority": "high"},
        {"env": {f"K{i}": "v" for i in range(64)}, "labels": {f"k{i}": "v" for i in range(16)}},
        {"image": "r.io/" + "i" * 250 + ":" + "t" * 128, "command": ["x"] * 64, "args": ["y"] * 64},
        {"cpu": "500m", "memory": "512Mi", "accelerators": 0},
    ]
    for i, changes in enumerate(edges):
        response = await api.client.post(WORKLOADS, json=example_workload(f"edge-{i}", **changes))
        assert response.status_code == 202, (changes, response.text)
    response = await api.client.post(WORKLOADS, json=example_workload("n" * 40, accelerators=0))
    assert response.status_code == 202, response.text


async def _refused_beyond_the_pool(api: Scenario, **changes: Any) -> dict[str, Any]:
    """The problem the example workload with `changes`, more than its pool holds, is refused
    with."""
    await api.setup_pool(wait=False)
    response = await api.client.post(WORKLOADS, json=example_workload(**changes))
    return assert_problem(response, 422, "exceeds-pool-capacity")


async def test_a_workload_that_can_never_fit_its_pool_is_refused_with_the_numbers(
    api: Scenario,
) -> None:
    problem = await _refused_beyond_the_pool(api, accelerators=8, replicas=3, memory="1Ti")
    assert problem["compute_pool"] == POOL
    assert problem["accelerator_class"] == CLASS
    assert problem["requested"] == {"accelerators": "24", "cpu": "96", "memory": "3Ti"}
    assert problem["pool_capacity"] == {"accelerators": "16", "cpu": "256", "memory": "2Ti"}
    assert sorted(e["field"] for e in problem["errors"]) == ["accelerators", "memory"]
    assert "16" in problem["detail"] and "24" in problem["detail"]
    # Exactly filling the pool is fine.
    fits = await api.client.post(WORKLOADS, json=example_workload(accelerators=8, replicas=2))
    assert fits.status_code == 202, fits.text


async def test_the_pool_must_exist_in_this_project(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.create_project("other")
    await api.for_project("other").create_pool("other-pool")
    for pool in ("nope", "other-pool"):
        response = await api.client.post(WORKLOADS, json=example_workload(compute_pool=pool))
        assert response.status_code == 422, pool
        assert [e["field"] for e in response.json()["errors"]] == ["compute_pool"]


async def test_bodies_that_are_not_json_objects_get_the_matching_problem(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    json_headers = {"Content-Type": "application/json"}

    malformed = await api.client.post(WORKLOADS, content=b'{"name": ', headers=json_headers)
    assert malformed.status_code == 400
    assert malformed.json()["type"] == "https://aicp.dev/problems/malformed-json"

    as_text = await api.client.post(
        WORKLOADS, content=b"name=train", headers={"Content-Type": "text/plain"}
    )
    assert as_text.status_code == 415
    assert as_text.json()["type"] == "https://aicp.dev/problems/unsupported-media-type"

    huge = example_workload(env={"BIG": "x" * 30000}, args=["y" * 4000] * 64)
    too_large = await api.client.post(WORKLOADS, json=huge)
    assert too_large.status_code == 413
    assert too_large.json()["type"] == "https://aicp.dev/problems/payload-too-large"

    array = await api.client.post(WORKLOADS, content=b"[]", headers=json_headers)
    assert array.status_code == 422

    assert (await api.client.get(WORKLOADS)).json()["items"] == []


async def test_a_multi_node_workload_the_pool_cannot_hold_is_refused_with_the_numbers(
    api: Scenario,
) -> None:
    problem = await _refused_beyond_the_pool(api, accelerators=8, nodes=3, memory="64Gi")
    assert problem["requested"]["accelerators"] == "24"
    assert problem["errors"] == [
        {
            "field": "accelerators",
            "message": "nodes (3) x per-node accelerators = 24 exceeds the pool's 16",
        }
    ]
