"""HTTP contract details: HEAD, OPTIONS and 405 with Allow on every route, problems under
/schema, titles naming where the error is, unknown query parameters, declared headers."""

from __future__ import annotations

import logging
import re
from typing import Any

import httpx
import pytest

from tests.support.api_client import ADMIN_TOKEN

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def openapi(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/schema/openapi.json")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def concrete(path: str) -> str:
    return (
        path.replace("{project}", "research")
        .replace("{pool}", "p")
        .replace("{name}", "w")
        .replace("{accelerator_class}", "h100")
        .replace("{token_id}", "00000000-0000-0000-0000-000000000000")
    )


async def test_every_path_answers_options_with_the_methods_it_serves(
    shared_client: httpx.AsyncClient,
) -> None:
    paths = (await openapi(shared_client))["paths"]
    async with httpx.AsyncClient(base_url=shared_client.base_url) as anonymous:
        for path, item in paths.items():
            documented = {method.upper() for method in item if method != "parameters"}
            response = await anonymous.options(concrete(path))
            assert response.status_code == 204, path
            allowed = set(response.headers["allow"].split(", "))
            assert allowed == documented | {"OPTIONS"} | (
                {"HEAD"} if "GET" in documented else set()
            )


async def test_head_answers_like_get_without_a_body_on_every_get_route(
    shared_client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    paths = (await openapi(shared_client))["paths"]
    for path in [*paths, "/schema/openapi.json", "/schema/swagger"]:
        if "get" not in paths.get(path, {"get": {}}):
            continue
        get = await shared_client.get(concrete(path))
        with caplog.at_level(logging.INFO):
            head = await shared_client.head(concrete(path))
            await shared_client.get("/healthz")  # the HEAD's answer is over on the server too
        assert head.status_code == get.status_code, path
        assert head.content == b""
        assert head.headers["content-type"] == get.headers["content-type"]
        if "content-length" in get.headers and not path.endswith(("/watch", "/metrics")):
            assert head.headers["content-length"] == get.headers["content-length"], path
        said = [
            f"{r.name}: {r.getMessage()}"
            for r in caplog.records
            if r.levelno >= logging.INFO
            and not r.name.startswith(("httpx", "httpcore", "uvicorn.access"))
        ]
        assert said == [], f"HEAD {path} logged {said}"


async def test_a_wrong_method_is_405_with_allow(shared_client: httpx.AsyncClient) -> None:
    response = await shared_client.patch("/api/v1/projects")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD, OPTIONS, POST"
    assert response.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize("path", ["/schema/nothing", "/schema/swagger/x", "/schema/openapi.yml"])
async def test_unknown_paths_under_schema_are_404_problems(
    shared_client: httpx.AsyncClient, path: str
) -> None:
    response = await shared_client.get(path)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["type"].endswith("/not-found")


QUERY, HEADER = "Query parameters are invalid", "Request headers are invalid"


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "title", "field"),
    [
        ("GET", "/api/v1/projects?limit=0", {}, None, QUERY, "limit"),
        ("GET", "/api/v1/projects?limit=x", {}, None, QUERY, "limit"),
        ("GET", "/api/v1/projects?cursor=zz", {}, None, QUERY, "cursor"),
        ("GET", "/api/v1/projects?follow=1", {}, None, QUERY, "follow"),
        ("GET", "/api/v1/projects/research/workloads/w/logs?since=1h", {}, None, QUERY, "since"),
        ("DELETE", "/api/v1/projects/research", {"If-Match": "x"}, None, HEADER, "If-Match"),
        ("POST", "/api/v1/projects", {"Idempotency-Key": "k" * 300}, {"name": "ok-1"}, HEADER,
         "Idempotency-Key"),
        ("POST", "/api/v1/projects", {}, {"name": 5}, "Request body is invalid", "name"),
    ],
)  # fmt: skip
async def test_problems_are_titled_by_where_the_error_is(
    shared_client: httpx.AsyncClient,
    method: str,
    path: str,
    headers: dict[str, str],
    body: Any,
    title: str,
    field: str,
) -> None:
    await shared_client.post("/api/v1/projects", json={"name": "research"})
    response = await shared_client.request(method, path, headers=headers, json=body)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["title"] == title
    assert field in [error["field"] for error in problem["errors"]]


async def test_idempotency_key_and_if_match_are_declared_header_parameters(
    shared_client: httpx.AsyncClient,
) -> None:
    paths = (await openapi(shared_client))["paths"]
    for path, item in paths.items():
        for method, operation in item.items():
            headers = {p["name"] for p in operation.get("parameters", []) if p["in"] == "header"}
            if method == "post" and "Idempotency-Key" not in headers:
                # A role binding is unique per group and scope: a retried create is a 409.
                assert path.endswith(
                    ("/accelerator-bindings/{accelerator_class}", "/role-bindings")
                ), path
            if method in ("patch", "delete", "put") and path.split("/")[-2] in (
                "projects", "compute-pools", "workloads",
            ):  # fmt: skip
                assert "If-Match" in headers, (method, path)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("image", "Ghcr.io/Acme/Train:1.4"),
        ("image", "ghcr.io/acme/train:"),
        ("image", "ghcr.io/acme/train@sha256:short"),
        ("image", "ghcr.io//train"),
        ("labels", {"kueue.x-k8s.io/queue-name": "other"}),
        ("labels", {"x.kueue.x-k8s.io/a": "b"}),
    ],
)
async def test_images_no_registry_accepts_and_kueue_labels_are_422(
    shared_client: httpx.AsyncClient, field: str, value: Any
) -> None:
    body = {"name": "w1", "compute_pool": "p", "image": "ghcr.io/acme/train:1.4", field: value}
    response = await shared_client.post("/api/v1/projects/research/workloads", json=body)
    assert response.status_code == 422, response.text
    assert any(error["field"].startswith(field) for error in response.json()["errors"])


async def test_options_needs_no_token_and_reveals_nothing_else(
    shared_client: httpx.AsyncClient,
) -> None:
    async with httpx.AsyncClient(base_url=shared_client.base_url) as anonymous:
        response = await anonymous.options("/api/v1/projects/secret-project")
        assert response.status_code == 204 and response.content == b""
        assert (await anonymous.get("/api/v1/projects/secret-project")).status_code == 401
    assert ADMIN_TOKEN


async def test_the_interactive_docs_page_loads_everything_from_this_server(
    shared_client: httpx.AsyncClient,
) -> None:
    async with httpx.AsyncClient(base_url=shared_client.base_url) as anonymous:
        page = await anonymous.get("/schema/swagger")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
        assert len(assets) >= 4
        for asset in assets:
            assert asset.startswith("/schema/swagger-ui/"), asset  # nothing from a CDN
            loaded = await anonymous.get(asset)
            assert loaded.status_code == 200 and loaded.content, asset
        assert '"openapi"' in page.text  # the document is embedded in the page
