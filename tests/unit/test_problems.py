"""The one exception handler: domain errors become problems; anything else is a bare 500."""

from __future__ import annotations

import json
import logging

import pytest
from litestar import Litestar, Request

from app.api.problems import problem_response
from app.domain import errors
from app.observability.logs import request_id_var


def request_for(path: str) -> Request[object, object, object]:
    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [],
        "app": Litestar(logging_config=None),
        "state": {},
        "path_params": {},
        "server": ("127.0.0.1", 80),
        "scheme": "http",
        "root_path": "",
    }
    return Request(scope)  # type: ignore[arg-type]


def test_an_unexpected_error_is_a_500_with_the_request_id_and_nothing_else(
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = request_id_var.set("req-42")
    try:
        with caplog.at_level(logging.ERROR):
            response = problem_response(
                request_for("/api/v1/projects"),
                RuntimeError("SELECT secret FROM api_tokens"),
            )
    finally:
        request_id_var.reset(token)
    body = json.loads(response.content)
    assert response.status_code == 500
    assert body["type"] == "https://aicp.dev/problems/internal-error"
    assert body["request_id"] == "req-42"
    assert "secret" not in response.content.decode()
    assert "Traceback" not in response.content.decode()
    assert "SELECT secret" in caplog.text  # the operator sees it in the log


@pytest.mark.parametrize(
    ("error", "status", "slug", "members"),
    [
        (errors.Forbidden("admin"), 403, "forbidden", {"required_role": "admin"}),
        (errors.InUse(["compute-pool/a"]), 409, "in-use", {"referenced_by": ["compute-pool/a"]}),
        (errors.GenerationMismatch(4), 412, "generation-mismatch", {"current_generation": 4}),
        (errors.AlreadyExists(), 409, "already-exists", {}),
        (errors.BeingDeleted(), 409, "being-deleted", {}),
        (errors.NotFound(), 404, "not-found", {}),
        (errors.MalformedJson(), 400, "malformed-json", {}),
        (errors.PayloadTooLarge(), 413, "payload-too-large", {}),
        (errors.UnsupportedMediaType(), 415, "unsupported-media-type", {}),
        (errors.IdempotencyKeyReused(), 422, "idempotency-key-reused", {}),
        (errors.CreatedResourceGone(), 410, "created-resource-gone", {}),
        (errors.TokenLimitReached(3), 409, "token-limit-reached", {"limit": 3}),
        (
            errors.ExceedsPoolCapacity(
                compute_pool="p",
                accelerator_class="h100",
                requested={"accelerators": "9"},
                pool_capacity={"accelerators": "8"},
                errors=[],
            ),
            422,
            "exceeds-pool-capacity",
            {
                "compute_pool": "p",
                "accelerator_class": "h100",
                "requested": {"accelerators": "9"},
                "pool_capacity": {"accelerators": "8"},
            },
        ),
        (
            errors.ExceedsNodeCapacity(
                compute_pool="p",
                accelerator_class="h100",
                requested={"accelerators": "16"},
                node_capacity={"accelerators": "8"},
                largest_nodes={"accelerators": "gpu-node-1"},
                errors=[],
            ),
            422,
            "exceeds-node-capacity",
            {
                "compute_pool": "p",
                "accelerator_class": "h100",
                "requested": {"accelerators": "16"},
                "node_capacity": {"accelerators": "8"},
                "largest_nodes": {"accelerators": "gpu-node-1"},
            },
        ),
    ],
)
def test_each_domain_error_has_its_slug_status_and_members(
    error: errors.AicpError, status: int, slug: str, members: dict[str, object]
) -> None:
    response = problem_response(request_for("/x"), error)
    body = json.loads(response.content)
    assert response.status_code == status
    assert response.media_type == "application/problem+json"
    assert body["type"] == f"https://aicp.dev/problems/{slug}"
    assert body["detail"]
    for key, value in members.items():
        assert body[key] == value


def test_an_unreachable_database_is_503_with_retry_after() -> None:
    response = problem_response(request_for("/x"), errors.StoreUnavailable())
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"


def test_an_error_class_docstring_is_its_default_detail() -> None:
    assert errors.NotFound().detail == "No such resource is visible to this token."
    assert errors.Unauthorized().detail == "A valid bearer token is required."
