"""A list's cursor works only on that list: another project's, another resource's, other
filters' or a tampered cursor is a 422 naming `cursor` (never a 500, never another list's rows)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.scenario import CLASS, Scenario


async def next_cursor(api: Scenario, path: str, **params: Any) -> str:
    response = await api.client.get(path, params={"limit": 1, **params})
    assert response.status_code == 200, response.text
    cursor: str = response.json()["next_cursor"]
    assert cursor
    return cursor


async def assert_cursor_refused(api: Scenario, path: str, cursor: str, **params: Any) -> None:
    response = await api.client.get(path, params={"cursor": cursor, **params})
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["title"] == "Query parameters are invalid"
    assert [error["field"] for error in body["errors"]] == ["cursor"]


async def test_cursors_are_refused_by_every_other_list(api: Scenario) -> None:
    await api.put_binding(CLASS)
    await api.put_binding("a100-40g")
    for project in ("alpha", "beta"):
        await api.create_project(project)
        for pool in ("p1", "p2"):
            await api.for_project(project).create_pool(pool)
    quota = {"quota": {"accelerators": 1, "cpu": "1", "memory": "1Gi"}}
    patched = await api.client.patch("/api/v1/projects/alpha/compute-pools/p1", json=quota)
    assert patched.status_code == 202, patched.text
    lists = {
        "projects": ("/api/v1/projects", {}),
        "bindings": ("/api/v1/accelerator-bindings", {}),
        "alpha pools": ("/api/v1/projects/alpha/compute-pools", {}),
        "beta pools": ("/api/v1/projects/beta/compute-pools", {}),
        "alpha pool events": ("/api/v1/projects/alpha/compute-pools/p1/events", {}),
    }
    cursors = {
        name: await next_cursor(api, path, **params) for name, (path, params) in lists.items()
    }
    for name, (path, params) in lists.items():
        page = await api.client.get(path, params={"cursor": cursors[name], "limit": 1, **params})
        assert page.status_code == 200, page.text
        for other, cursor in cursors.items():
            if other != name:
                await assert_cursor_refused(api, path, cursor, **params)


async def test_a_cursor_is_bound_to_the_filters_it_was_issued_with(api: Scenario) -> None:
    await api.put_binding(CLASS)
    await api.create_project("alpha")
    await api.for_project("alpha").create_pool("p1")
    await api.for_project("alpha").create_pool("p2")
    path = "/api/v1/projects/alpha/compute-pools"
    cursor = await next_cursor(api, "/api/v1/projects/alpha/compute-pools")
    workloads = "/api/v1/projects/alpha/workloads"
    await assert_cursor_refused(api, workloads, cursor)
    await assert_cursor_refused(api, workloads, cursor, state="RUNNING")
    await assert_cursor_refused(api, path + "/p1/events", cursor)


@pytest.mark.parametrize(
    "mutation",
    [
        pytest.param(lambda c: c[:-1], id="truncated"),
        pytest.param(lambda c: c.split(".")[0], id="tag-removed"),
        pytest.param(lambda c: "A" + c[1:] if c[0] != "A" else "B" + c[1:], id="position-edited"),
        pytest.param(lambda c: c + "x", id="extended"),
        pytest.param(lambda c: "%00" + c, id="nul"),
        pytest.param(lambda c: "bm90IGEgY3Vyc29y", id="plain-base64"),
    ],
)
async def test_a_tampered_cursor_is_422(api: Scenario, mutation: Any) -> None:
    for name in ("alpha", "beta"):
        await api.create_project(name)
    cursor = await next_cursor(api, "/api/v1/projects")
    await assert_cursor_refused(api, "/api/v1/projects", mutation(cursor))
