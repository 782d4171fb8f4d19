"""Every error is an RFC 9457 problem with the documented slug and members."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.api_client import ADMIN_TOKEN
from tests.support.problems import assert_problem

pytestmark = pytest.mark.asyncio(loop_scope="module")


def field_errors(body: dict[str, object]) -> dict[str, str]:
    errors = body["errors"]
    assert isinstance(errors, list)
    return {error["field"]: error["message"] for error in errors}


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        pytest.param({"name": "Research"}, "name", "must be a DNS-1123 label", id="uppercase"),
        pytest.param({"name": "-x"}, "name", "must be a DNS-1123 label", id="leading-dash"),
        pytest.param({"name": "a" * 31}, "name", "must be at most 30 characters", id="too-long"),
        pytest.param({"name": ""}, "name", "must be at least 1 characters", id="empty"),
        pytest.param({"name": "aicp-x"}, "name", "reserved prefix 'aicp-'", id="aicp-prefix"),
        pytest.param({"name": "kube-x"}, "name", "reserved prefix 'kube-'", id="kube-prefix"),
        pytest.param({"name": "system-x"}, "name", "reserved prefix 'system-'", id="sys-prefix"),
        pytest.param({"name": 7}, "name", "must be a string, got an integer", id="wrong-type"),
        pytest.param({}, "name", "is required", id="missing"),
        pytest.param({"name": "ok", "nmae": "x"}, "nmae", "unknown field", id="unknown-field"),
        pytest.param(
            {"name": "ok", "labels": {"a": 1}},
            "labels",
            "must be a string",
            id="label-value-type",
        ),
        pytest.param(
            {"name": "ok", "labels": {"bad key!": "v"}}, "labels", "", id="label-key-syntax"
        ),
        pytest.param(
            {"name": "ok", "display_name": "x" * 201},
            "display_name",
            "must be at most 200 characters",
            id="display-name-long",
        ),
    ],
)
async def test_an_invalid_project_body_is_422_naming_the_field(
    shared_client: httpx.AsyncClient, body: dict[str, object], field: str, message: str
) -> None:
    response = await shared_client.post("/api/v1/projects", json=body)
    problem = assert_problem(response, 422, "validation-error")
    errors = field_errors(problem)
    matching = [name for name in errors if name == field or name.startswith(field + ".")]
    assert matching, errors
    assert message in errors[matching[0]]


async def test_every_invalid_field_is_reported_at_once(shared_client: httpx.AsyncClient) -> None:
    response = await shared_client.post(
        "/api/v1/projects", json={"name": "Bad_Name", "replica": 2, "display_name": 5}
    )
    problem = assert_problem(response, 422, "validation-error")
    errors = field_errors(problem)
    assert errors["replica"] == "unknown field"
    assert "name" in errors
    assert "display_name" in errors
    assert problem["detail"] == "3 fields are invalid"
    assert problem["instance"] == "/api/v1/projects"


async def test_a_nested_invalid_field_is_named_by_its_dotted_path(
    shared_client: httpx.AsyncClient,
) -> None:
    response = await shared_client.put(
        "/api/v1/accelerator-bindings/h100-80g",
        json={
            "resource_name": "nvidia.com/gpu",
            "flavor": "h100-80g",
            "tolerations": [{"key": "k", "effect": "Sometimes"}],
        },
    )
    errors = field_errors(assert_problem(response, 422, "validation-error"))
    assert "tolerations.0.effect" in errors


async def test_a_body_that_is_not_json_is_400_malformed_json(
    shared_client: httpx.AsyncClient,
) -> None:
    response = await shared_client.post(
        "/api/v1/projects", content=b'{"name": "x"', headers={"content-type": "application/json"}
    )
    assert_problem(response, 400, "malformed-json")


async def test_a_json_array_instead_of_an_object_is_422(shared_client: httpx.AsyncClient) -> None:
    response = await shared_client.post("/api/v1/projects", json=[{"name": "x"}])
    errors = field_errors(assert_problem(response, 422, "validation-error"))
    assert "body" in errors


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_a_body_not_sent_as_json_is_415(
    shared_client: httpx.AsyncClient, content_type: str | None
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    response = await shared_client.post(
        "/api/v1/projects", content=json.dumps({"name": "x"}).encode(), headers=headers
    )
    assert_problem(response, 415, "unsupported-media-type")


async def test_a_body_over_256_kib_is_413(shared_client: httpx.AsyncClient) -> None:
    body = {"name": "big", "labels": {"k": "v" * (300 * 1024)}}
    response = await shared_client.post("/api/v1/projects", json=body)
    assert_problem(response, 413, "payload-too-large")


async def test_a_body_over_256_kib_without_content_length_is_413(
    shared_client: httpx.AsyncClient,
) -> None:
    async def chunks():  # type: ignore[no-untyped-def]
        yield b'{"name": "big", "labels": {"k": "'
        for _ in range(300):
            yield b"v" * 1024
        yield b'"}}'

    response = await shared_client.post(
        "/api/v1/projects", content=chunks(), headers={"content-type": "application/json"}
    )
    assert_problem(response, 413, "payload-too-large")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        pytest.param("limit=0", "limit", id="limit-zero"),
        pytest.param("limit=501", "limit", id="limit-over-500"),
        pytest.param("limit=ten", "limit", id="limit-not-a-number"),
        pytest.param("cursor=not-a-cursor", "cursor", id="bad-cursor"),
    ],
)
async def test_bad_list_parameters_are_422_naming_the_parameter(
    shared_client: httpx.AsyncClient, query: str, field: str
) -> None:
    response = await shared_client.get(f"/api/v1/projects?{query}")
    errors = field_errors(assert_problem(response, 422, "validation-error"))
    assert field in errors


async def test_an_unknown_path_is_404_not_found(shared_client: httpx.AsyncClient) -> None:
    assert_problem(await shared_client.get("/api/v1/nothing-here"), 404, "not-found")


async def test_a_missing_project_is_404_not_found(shared_client: httpx.AsyncClient) -> None:
    body = assert_problem(await shared_client.get("/api/v1/projects/ghost"), 404, "not-found")
    assert "ghost" in str(body["detail"])


async def test_every_response_carries_a_request_id(shared_client: httpx.AsyncClient) -> None:
    response = await shared_client.get("/api/v1/projects", headers={"X-Request-Id": "abc-123"})
    assert response.headers["x-request-id"] == "abc-123"
    other = await shared_client.get("/healthz")
    assert len(other.headers["x-request-id"]) >= 8


async def test_422s_are_counted_by_field_in_metrics(shared_client: httpx.AsyncClient) -> None:
    await shared_client.post("/api/v1/projects", json={"name": "ok", "display_name": 1})
    metrics = (await shared_client.get("/metrics")).text
    assert 'aicp_validation_errors_total{field="display_name"}' in metrics
    assert 'aicp_http_requests_total{method="POST",route="/api/v1/projects",status="422"}' in (
        metrics
    )


async def test_the_openapi_document_describes_the_api(shared_client: httpx.AsyncClient) -> None:
    response = await shared_client.get("/schema/openapi.json", headers={"Authorization": ""})
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.")
    create = document["paths"]["/api/v1/projects"]["post"]
    assert create["description"]
    assert "202" in create["responses"]
    assert "422" in create["responses"]
    assert ADMIN_TOKEN not in response.text


async def test_a_wrong_method_is_405_as_a_problem(shared_client: httpx.AsyncClient) -> None:
    assert_problem(
        await shared_client.patch("/api/v1/projects", json={}), 405, "method-not-allowed"
    )


async def test_metrics_lists_every_operations_metric_with_help(
    shared_client: httpx.AsyncClient,
) -> None:
    text = (await shared_client.get("/metrics")).text
    for name in (
        "aicp_http_requests_total",
        "aicp_http_request_duration_seconds",
        "aicp_validation_errors_total",
        "aicp_reconcile_total",
        "aicp_reconcile_duration_seconds",
        "aicp_reconcile_errors_total",
        "aicp_reconcile_lag_seconds",
        "aicp_leases_held",
        "aicp_watch_events_total",
        "aicp_watch_restarts_total",
        "aicp_drift_corrections_total",
        "aicp_workloads",
        "aicp_workload_accepted_to_job_created_seconds",
        "aicp_workload_accepted_to_admitted_seconds",
        "aicp_workload_accepted_to_running_seconds",
        "aicp_resources_stuck_deleting",
    ):
        base = name.removesuffix("_total")
        assert f"# HELP {base}" in text or f"# HELP {name}" in text, name


async def test_request_latency_is_recorded_by_route_template(
    shared_client: httpx.AsyncClient,
) -> None:
    await shared_client.get("/api/v1/projects/nobody")
    text = (await shared_client.get("/metrics")).text
    assert (
        'aicp_http_request_duration_seconds_count{method="GET",'
        'route="/api/v1/projects/{project}",status="404"}'
    ) in text


async def test_an_overlong_idempotency_key_is_422_naming_the_header(
    shared_client: httpx.AsyncClient,
) -> None:
    response = await shared_client.post(
        "/api/v1/projects", json={"name": "keyed"}, headers={"Idempotency-Key": "k" * 256}
    )
    errors = field_errors(assert_problem(response, 422, "validation-error"))
    assert "Idempotency-Key" in errors


async def test_a_nul_character_in_a_body_is_422_naming_each_field(
    shared_client: httpx.AsyncClient,
) -> None:
    response = await shared_client.post(
        "/api/v1/projects",
        content=b'{"name": "nul-body", "display_name": "a\\u0000b", "labels": {"k": "\\u0000"}}',
        headers={"Content-Type": "application/json"},
    )
    body = assert_problem(response, 422, "validation-error")
    assert set(field_errors(body)) == {"display_name", "labels.k"}
    missing = await shared_client.get("/api/v1/projects/nul-body")
    assert missing.status_code == 404  # nothing was stored


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("/api/v1/projects/a%00b", id="project-path"),
        pytest.param("/api/v1/projects/a%00b/workloads", id="nested-path"),
        pytest.param("/api/v1/accelerator-bindings/a%00b", id="binding-path"),
    ],
)
async def test_a_nul_character_in_a_path_is_a_client_error_not_a_500(
    shared_client: httpx.AsyncClient, path: str
) -> None:
    response = await shared_client.get(path)
    assert 400 <= response.status_code < 500, response.text
    assert response.headers["content-type"].startswith("application/problem+json")


async def test_every_openapi_schema_has_its_own_description(
    shared_client: httpx.AsyncClient,
) -> None:
    document = (await shared_client.get("/schema/openapi.json")).json()
    schemas = document["components"]["schemas"]
    undescribed = [name for name, schema in schemas.items() if not schema.get("description")]
    assert undescribed == []
    assert "DNS" not in schemas["WorkloadSpec"]["description"]  # its own words, not a base's
    assert schemas["Quota"]["description"] != schemas["PoolCreate"]["description"]
