"""A dry run answers what the real call answers, whatever the input: for any workload body,
valid or not, a dry-run create's object is the real create's answer (apart from ids and
times), and a refused one is refused with the very same problem."""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.integration.api.test_dry_run import comparable

pytestmark = pytest.mark.asyncio(loop_scope="module")

QUOTA = {"accelerators": 16, "cpu": "64", "memory": "256Gi"}
WORKLOADS = "/api/v1/projects/drytest/workloads"
POOLS = "/api/v1/projects/drytest/compute-pools"
_names = itertools.count()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(shared_client: httpx.AsyncClient) -> httpx.AsyncClient:
    binding = {"resource_name": "nvidia.com/gpu", "flavor": "h100-80g", "node_labels": {}}
    response = await shared_client.put("/api/v1/accelerator-bindings/h100-80g", json=binding)
    assert response.status_code in (200, 201), response.text
    response = await shared_client.post(
        "/api/v1/projects", json={"name": "drytest", "limits": {"accelerators": {"h100-80g": 24}}}
    )
    assert response.status_code == 202, response.text
    pool = {"name": "pool", "accelerator_class": "h100-80g", "quota": QUOTA}
    response = await shared_client.post(POOLS, json=pool)
    assert response.status_code == 202, response.text
    return shared_client


VALID: dict[str, st.SearchStrategy[Any]] = {
    "image": st.sampled_from(["ghcr.io/acme/train:1.4", "busybox"]),
    "accelerators": st.integers(0, 8),
    "replicas": st.integers(1, 2),
    "cpu": st.sampled_from(["1", "500m", "2.5", "32"]),
    "memory": st.sampled_from(["1Gi", "512Mi", "128Gi"]),
    "priority": st.sampled_from(["low", "normal", "high"]),
    "retries": st.integers(0, 10),
    "max_runtime_seconds": st.integers(60, 100_000),
    "env": st.dictionaries(st.sampled_from(["A", "B_2"]), st.text(max_size=5), max_size=2),
    "labels": st.dictionaries(st.just("team"), st.sampled_from(["nlp", ""]), max_size=1),
    "command": st.lists(st.text(max_size=5), max_size=3),
}
#: Values each field refuses: out of range, malformed, reserved, too big for the pool.
INVALID: dict[str, list[Any]] = {
    "image": ["Bad/Image", ""],
    "accelerators": [-1, 17, 70],
    "replicas": [0, 65],
    "cpu": ["65", "0", "lots", "1T"],
    "memory": ["1Pi", "-1", "a lot"],
    "priority": ["urgent"],
    "retries": [-1, 11],
    "max_runtime_seconds": [0, 59],
    "env": [{"AICP_X": "1"}, {"1x": "1"}],
    "labels": [{"aicp.dev/x": "1"}, {"Bad Key": "1"}],
    "command": ["python"],
    "compute_pool": ["nope"],
    "replica": [3],
}


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A workload body: some optional fields, valid; now and then one or two refused."""
    body: dict[str, Any] = {"compute_pool": "pool", "image": draw(VALID["image"])}
    for field in draw(st.sets(st.sampled_from(sorted(VALID)))):
        body[field] = draw(VALID[field])
    for field in draw(st.sets(st.sampled_from(sorted(INVALID)), max_size=2)):
        body[field] = draw(st.sampled_from(INVALID[field]))
    return body


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=bodies())
async def test_a_dry_run_create_answers_what_the_real_create_answers(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    body = {"name": f"w-{next(_names)}", **body}
    dry = await client.post(WORKLOADS, json=body, params={"dry_run": "true"})
    real = await client.post(WORKLOADS, json=body)
    event(f"the real call answered {real.status_code}")
    if real.status_code == 202:
        assert dry.status_code == 200, dry.text
        assert dry.json()["status_code"] == 202
        assert comparable(dry.json()["object"]) == comparable(real.json())
        deleted = await client.delete(f"{WORKLOADS}/{body['name']}")  # room for the next one
        assert deleted.status_code == 202, deleted.text
    else:
        assert (dry.status_code, dry.json()) == (real.status_code, real.json())
