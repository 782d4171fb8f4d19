"""RFC 9457 problem answers as aicp gives them (docs/API.md, "Errors (RFC 9457)")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

PROBLEM = "https://aicp.dev/problems/"


def assert_problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    """`response` is the problem `slug` with `status`, a title and a detail; returns its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["type"] == PROBLEM + slug
    assert body["status"] == status
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    return body
