"""Store rows as a reconcile step reads them, for tests of the steps' pure parts."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from app.domain.states import WorkloadState
from app.store.reconciling import WorkloadRow

CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def workload_row(
    observed: dict[str, Any],
    *,
    generation: int = 1,
    observed_generation: int = 1,
    created_at: datetime = CREATED,
) -> WorkloadRow:
    """A RUNNING workload `research/train` on `h100-pool` (GPUs as `nvidia.com/gpu`) whose last
    observation is `observed`."""
    return WorkloadRow(
        id=uuid.uuid4(),
        project_id=uuid.uuid4(),
        project="research",
        pool="h100-pool",
        queues_ready=True,
        name="train",
        spec={},
        generation=generation,
        observed_generation=observed_generation,
        state=WorkloadState.RUNNING,
        state_reason=None,
        observed=observed,
        deleting=False,
        created_at=created_at,
        accelerator_resource="nvidia.com/gpu",
    )
