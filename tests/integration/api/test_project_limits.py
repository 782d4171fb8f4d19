"""Quota ceilings: the platform admin's per-project limits bound what the project's compute
pools hold together; a pool beyond them is 422 naming the limit and the numbers, limits below
what the pools hold are 409, and concurrent creates cannot slip under a limit together."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from app.main import Service
from tests.support.api_client import ADMIN_TOKEN
from tests.support.cli import Cli
from tests.support.problems import assert_problem
from tests.support.scenario import CLASS, Scenario

P = "/api/v1/projects/tenant"
POOLS = f"{P}/compute-pools"
LIMITS = {"accelerators": {CLASS: 16}, "cpu": "256", "memory": "2Ti"}


def pool(name: str, accelerators: int, cpu: str = "8", memory: str = "64Gi", **more: Any) -> Any:
    return {
        "name": name,
        "accelerator_class": more.get("accelerator_class", CLASS),
        "quota": {"accelerators": accelerators, "cpu": cpu, "memory": memory},
    }


async def limited(api: Scenario, limits: Any = LIMITS) -> None:
    await api.put_binding(CLASS)
    await api.put_binding("a100-40g")
    created = await api.create_project("tenant", limits=limits)
    assert created["limits"] == {**{"accelerators": None, "cpu": None, "memory": None}, **limits}


def exceeded(response: httpx.Response) -> list[dict[str, str]]:
    problem = assert_problem(response, 422, "exceeds-project-limit")
    assert problem["project"] == "tenant"
    found: list[dict[str, str]] = problem["exceeded"]
    return found


async def test_a_pool_beyond_the_projects_limit_is_422_naming_the_limit_and_numbers(
    api: Scenario,
) -> None:
    await limited(api)
    assert (await api.client.post(POOLS, json=pool("first", 12))).status_code == 202
    hostile = await api.client.post(POOLS, json=pool("grab", 100_000))
    assert exceeded(hostile) == [
        {
            "limit": f"accelerators.{CLASS}",
            "allowed": "16",
            "allocated": "12",
            "requested": "100000",
        }
    ]
    detail = hostile.json()["detail"]
    assert f"accelerators.{CLASS} 16" in detail and "hold 12" in detail and "100000" in detail
    assert hostile.json()["errors"][0]["field"] == "quota.accelerators"
    assert (await api.client.post(POOLS, json=pool("rest", 4))).status_code == 202
    assert exceeded(await api.client.post(POOLS, json=pool("one-more", 1)))


async def test_cpu_memory_and_classes_not_named_are_limited_too(api: Scenario) -> None:
    await limited(api)
    over = await api.client.post(POOLS, json=pool("big", 1, cpu="300", memory="3Ti"))
    assert [(e["limit"], e["allowed"], e["requested"]) for e in exceeded(over)] == [
        ("cpu", "256", "300"),
        ("memory", "2Ti", "3Ti"),
    ]
    other = await api.client.post(POOLS, json=pool("a100", 1, accelerator_class="a100-40g"))
    assert exceeded(other)[0]["limit"] == "accelerators.a100-40g"
    assert exceeded(other)[0]["allowed"] == "0"
    cpu_only = await api.client.post(POOLS, json=pool("cpu-only", 0, accelerator_class="a100-40g"))
    assert cpu_only.status_code == 202, cpu_only.text


async def test_a_quota_change_beyond_the_limit_is_422_and_within_it_202(api: Scenario) -> None:
    await limited(api)
    assert (await api.client.post(POOLS, json=pool("a", 8))).status_code == 202
    assert (await api.client.post(POOLS, json=pool("b", 8))).status_code == 202
    quota = {"accelerators": 9, "cpu": "8", "memory": "64Gi"}
    grown = await api.client.patch(f"{POOLS}/a", json={"quota": quota})
    assert exceeded(grown)[0] == {
        "limit": f"accelerators.{CLASS}",
        "allowed": "16",
        "allocated": "8",
        "requested": "9",
    }
    quota["accelerators"] = 4
    assert (await api.client.patch(f"{POOLS}/a", json={"quota": quota})).status_code == 202
    quota["accelerators"] = 8
    assert (await api.client.patch(f"{POOLS}/a", json={"quota": quota})).status_code == 202


async def test_without_limits_a_project_is_unlimited_as_before(api: Scenario) -> None:
    await api.put_binding(CLASS)
    created = await api.create_project("tenant")
    assert created["limits"] is None
    huge = await api.client.post(POOLS, json=pool("huge", 100_000, cpu="1000000", memory="1Pi"))
    assert huge.status_code == 202, huge.text


async def test_pools_created_at_once_never_hold_more_than_the_limit_together(api: Scenario) -> None:
    await limited(api)
    answers = await asyncio.gather(
        *(api.client.post(POOLS, json=pool(f"p-{n}", 3)) for n in range(12))
    )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [202] * 5 + [422] * 7, statuses  # 5 x 3 = 15 <= 16 < 18
    held = (await api.client.get(POOLS, params={"limit": 100})).json()["items"]
    assert sum(p["quota"]["accelerators"] for p in held) == 15


async def test_limits_below_what_the_pools_hold_are_409_and_other_changes_202(
    api: Scenario,
) -> None:
    await limited(api)
    assert (await api.client.post(POOLS, json=pool("a", 12, cpu="200"))).status_code == 202
    lower = await api.client.patch(P, json={"limits": {"accelerators": {CLASS: 8}, "cpu": "100"}})
    assert lower.status_code == 409, lower.text
    problem = lower.json()
    assert problem["type"] == "https://aicp.dev/problems/limit-below-allocation"
    assert [(e["limit"], e["allowed"], e["allocated"]) for e in problem["exceeded"]] == [
        (f"accelerators.{CLASS}", "8", "12"),
        ("cpu", "100", "200"),
    ]
    assert "Shrink or delete pools first" in problem["detail"]
    raised = await api.client.patch(P, json={"limits": {"accelerators": {CLASS: 32}}})
    assert raised.status_code == 202, raised.text
    assert raised.json()["limits"]["accelerators"] == {CLASS: 32}
    assert raised.json()["generation"] == 2
    assert (await api.client.post(POOLS, json=pool("b", 20))).status_code == 202
    removed = await api.client.patch(P, json={"limits": None})
    assert removed.status_code == 202 and removed.json()["limits"] is None
    assert (await api.client.get(P)).json()["limits"] is None


async def test_bad_limits_are_422_and_only_the_platform_admin_sets_them(api: Scenario) -> None:
    await api.put_binding(CLASS)
    bad = await api.client.post(
        "/api/v1/projects",
        json={"name": "tenant", "limits": {"cpu": "lots", "accelerators": {CLASS: -1}}},
    )
    assert bad.status_code == 422
    await api.create_project("tenant")
    worse = await api.client.patch(P, json={"limits": {"memory": "1.5"}})
    assert worse.status_code == 422
    assert worse.json()["errors"][0]["field"] == "limits.memory"
    admin = await api.create_token("tenant", role="admin", expires_in_days=1)
    async with api.as_token(admin) as project_admin:
        denied = await project_admin.patch(P, json={"limits": None})
        assert denied.status_code == 403
        assert denied.json()["required_role"] == "platform-admin"


async def test_the_cli_creates_a_project_with_limits_and_shows_them(
    service: Service, api: Scenario, tmp_path: Path
) -> None:
    await api.put_binding(CLASS)
    cli = Cli(service.url, ADMIN_TOKEN, tmp_path)
    made = await cli.run(
        "create",
        "project",
        "tenant",
        "--limit-gpus",
        f"{CLASS}=16",
        "--limit-cpu",
        "256",
        "--limit-memory",
        "2Ti",
    )
    assert made.code == 0, made.err
    shown = (await api.client.get(P)).json()["limits"]
    assert shown == {"accelerators": {CLASS: 16}, "cpu": "256", "memory": "2Ti"}
    described = await cli.run("describe", "project", "tenant")
    assert described.code == 0, described.err
    assert f"{CLASS}=16" in described.out and "2Ti" in described.out
    wide = await cli.run("get", "projects", "-o", "wide")
    assert f"{CLASS}=16,cpu=256,memory=2Ti" in wide.out
    refused = await cli.run(
        "-p",
        "tenant",
        "create",
        "pool",
        "grab",
        "--class",
        CLASS,
        "--gpus",
        "100000",
        "--cpu",
        "8",
        "--memory",
        "8Gi",
    )
    assert refused.code != 0
    assert "exceeds the project's limits" in refused.err
    assert "100000" in refused.err
    bad = await cli.run("create", "project", "other", "--limit-gpus", f"{CLASS}=many")
    assert bad.code != 0 and "whole number" in bad.err
    manifest = tmp_path / "tenant.yaml"
    manifest.write_text(f"kind: Project\nname: tenant\nlimits:\n  accelerators: {{{CLASS}: 32}}\n")
    applied = await cli.run("apply", "-f", str(manifest))
    assert applied.code == 0, applied.err
    assert (await api.client.get(P)).json()["limits"]["accelerators"] == {CLASS: 32}
