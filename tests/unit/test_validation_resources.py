"""API resources built from stored rows: what a user reads back for a pool or a workload."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from app.domain.pool_resources import pool_from_row
from app.domain.workload_resources import ACCEPTED_REASON, workload_from_row

AT = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
SPEC = {"name": "train-7b", "compute_pool": "h100-pool", "image": "ghcr.io/acme/train:1.4"}


def workload_row(**changes: Any) -> dict[str, Any]:
    return {
        "id": uuid.UUID("3f2a1c4d-0000-4000-8000-000000000000"),
        "name": "train-7b",
        "spec": SPEC,
        "generation": 1,
        "observed_generation": 0,
        "state": "PENDING",
        "state_reason": None,
        "observed": {},
        "created_at": AT,
        "updated_at": AT,
        "created_by": "admin",
        **changes,
    }


def test_a_new_workload_reads_pending_with_the_accepted_reason_and_no_evidence() -> None:
    resource = workload_from_row(workload_row(), "research")
    status = msgspec.to_builtins(resource.status)
    assert status["reason"] == ACCEPTED_REASON
    assert status["job"] is None and status["nodes"] == [] and status["attempts"] == 0
    assert resource.spec.cpu == "1" and resource.compute_pool == "h100-pool"


def test_observed_evidence_fills_the_status() -> None:
    observed = {
        "job": {"name": "train-7b-3f2a1c-g1", "uid": "j-1"},
        "admission": {
            "cluster_queue": "aicp-research-h100-pool",
            "flavor": "h100-80g",
            "admitted_at": "2026-11-30T06:01:00Z",
        },
        "nodes": ["gpu-node-1"],
        "accelerator": {"product": "NVIDIA-H100-80GB-HBM3", "memory_mib": 81559, "count": 8},
        "attempts": 1,
        "started_at": "2026-11-30T06:02:00Z",
        "exit_code": None,
        "something_new": {"the reconciler may": "grow"},
    }
    row = workload_row(
        state="RUNNING",
        state_reason="1 of 1 pods running.",
        observed=observed,
        observed_generation=1,
    )
    status = msgspec.json.decode(msgspec.json.encode(workload_from_row(row, "research").status))
    assert status["state"] == "RUNNING" and status["reason"] == "1 of 1 pods running."
    assert status["job"] == {"name": "train-7b-3f2a1c-g1", "uid": "j-1"}
    assert status["admission"]["admitted_at"] == "2026-11-30T06:01:00Z"
    assert status["accelerator"]["count"] == 8 and status["nodes"] == ["gpu-node-1"]
    assert status["started_at"] == "2026-11-30T06:02:00Z" and status["finished_at"] is None


@pytest.mark.parametrize(
    ("project", "pool", "queue"),
    [
        pytest.param("research", "h100-pool", "aicp-research-h100-pool", id="short"),
        pytest.param("p" * 30, "q" * 30, None, id="hash-shortened"),
    ],
)
def test_a_pool_shows_its_queue_names_and_usage(project: str, pool: str, queue: str | None) -> None:
    row = {
        "id": uuid.uuid4(),
        "name": pool,
        "accelerator_class": "h100-80g",
        "spec": {"quota": {"accelerators": 16, "cpu": "256", "memory": "2Ti"}},
        "generation": 2,
        "observed_generation": 1,
        "state": "READY",
        "state_reason": "Ready.",
        "created_at": AT,
        "updated_at": AT,
        "created_by": "admin",
        "accelerators_admitted": 8,
        "workloads_admitted": 1,
        "workloads_pending": 3,
        "observed": {"usage": {"cpu_admitted": "32", "memory_admitted": "274877906944"}},
    }
    resource = pool_from_row(row, project)
    assert resource.status.local_queue == pool
    assert len(resource.status.cluster_queue) <= 63
    if queue is not None:
        assert resource.status.cluster_queue == queue
    assert msgspec.to_builtins(resource.status.usage) == {
        "accelerators_admitted": 8,
        "workloads_admitted": 1,
        "workloads_pending": 3,
        "cpu_admitted": "32",
        "memory_admitted": "274877906944",
    }
    assert resource.quota.memory == "2Ti" and resource.generation == 2
