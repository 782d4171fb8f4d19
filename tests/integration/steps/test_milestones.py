"""The events a state change records and the evidence a row keeps, as pure functions
(app.reconcile.steps.evidence): what a user reads in the trail and in `status`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from app.domain.classify import Classification
from app.domain.classify.evidence import Evidence
from app.domain.conditions import EvictionCause
from app.domain.states import WorkloadState
from app.domain.workload_resources import Admission, JobRef
from app.reconcile.steps.evidence import current_facts, facts_for, milestones
from app.store.reconciling import WorkloadRow
from tests.support.rows import workload_row

ADMISSION = Admission(cluster_queue="aicp-research-h100-pool", flavor="h100-80g")
STARTED = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)


def classified(
    state: WorkloadState,
    reason: str = "A reason.",
    cause: EvictionCause | None = None,
    **facts: Any,
) -> Classification:
    return Classification(state, reason, Evidence(**facts), cause)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param("QUEUED", classified(WorkloadState.QUEUED), [], id="no-change"),
        pytest.param(
            "QUEUED",
            classified(WorkloadState.ADMITTED, admission=ADMISSION),
            ["Admitted"],
            id="admitted",
        ),
        pytest.param(
            "QUEUED",
            classified(WorkloadState.RUNNING, admission=ADMISSION, started_at=STARTED),
            ["Admitted", "Started"],
            id="admitted-and-started-between-two-looks",
        ),
        pytest.param(
            "RUNNING",
            classified(WorkloadState.SUCCEEDED, started_at=STARTED),
            ["Succeeded"],
            id="succeeded",
        ),
        pytest.param(
            "QUEUED",
            classified(WorkloadState.SUCCEEDED, admission=ADMISSION, started_at=STARTED),
            ["Admitted", "Started", "Succeeded"],
            id="a-short-job-seen-only-when-done",
        ),
        pytest.param(
            "ADMITTED",
            classified(WorkloadState.FAILED),
            ["Failed"],
            id="failed-without-starting",
        ),
        pytest.param(
            "RUNNING",
            classified(
                WorkloadState.QUEUED,
                "Preempted by a higher-priority workload.",
                EvictionCause.PREEMPTED,
            ),
            ["Preempted"],
            id="preempted",
        ),
        pytest.param(
            "ADMITTED",
            classified(
                WorkloadState.QUEUED,
                "Evicted because a node it ran on failed.",
                EvictionCause.EVICTED,
            ),
            ["Requeued"],
            id="evicted",
        ),
        pytest.param(
            "RUNNING",
            classified(WorkloadState.QUEUED, "Preempted, in other words.", EvictionCause.EVICTED),
            ["Requeued"],
            id="the cause decides, not the words of the reason",
        ),
        pytest.param(
            "RUNNING",
            classified(WorkloadState.ADMITTED, "Admitted; starting 1 pod."),
            ["Restarting"],
            id="a-failed-pod-retried",
        ),
    ],
)
def test_each_milestone_crossed_is_one_event(
    old: str, new: Classification, expected: list[str]
) -> None:
    assert [kind for kind, _ in milestones(old, new)] == expected


def test_the_admitted_event_names_the_queue_and_flavor() -> None:
    [(_, message)] = milestones("QUEUED", classified(WorkloadState.ADMITTED, admission=ADMISSION))
    assert message == (
        "Kueue admitted the workload in cluster queue aicp-research-h100-pool on flavor h100-80g."
    )


def row(generation: int, observed_generation: int, observed: dict[str, Any]) -> WorkloadRow:
    return workload_row(
        observed,
        generation=generation,
        observed_generation=observed_generation,
        created_at=STARTED,
    )


RECORDED = {
    "job": {"name": "train-abc123-g1", "uid": "u1"},
    "nodes": ["gpu-node-0"],
    "attempts": 1,
    "previous_attempts": 1,
    "admission": {"cluster_queue": "aicp-research-h100-pool", "flavor": "h100-80g"},
}


def test_facts_of_the_same_generation_are_kept_and_attempts_carry_over() -> None:
    current = Evidence(
        job=JobRef(name="train-abc123-g1", uid="u2"), nodes=["gpu-node-1"], attempts=1
    )
    facts = current_facts(row(1, 1, RECORDED), current)
    assert facts["job"] == {"name": "train-abc123-g1", "uid": "u2"}
    assert facts["nodes"] == ["gpu-node-0", "gpu-node-1"]
    assert facts["attempts"] == 2  # one before the Job was recreated, one now
    assert facts["admission"]["flavor"] == "h100-80g"


def test_facts_of_an_older_generation_never_show_as_the_new_ones() -> None:
    current = Evidence(job=JobRef(name="train-abc123-g2", uid="u9"))
    facts = current_facts(row(2, 1, RECORDED), current)
    assert facts["job"] == {"name": "train-abc123-g2", "uid": "u9"}
    assert facts["nodes"] == [] and facts["admission"] is None
    assert facts["attempts"] == 0 and facts["previous_attempts"] == 0


def test_the_leaving_jobs_facts_are_merged_into_its_own_generation() -> None:
    leaving = Evidence(job=JobRef(name="train-abc123-g1", uid="u1"), exit_code=0, attempts=1)
    facts = facts_for(row(2, 1, RECORDED), leaving, 1)
    assert facts["nodes"] == ["gpu-node-0"] and facts["exit_code"] == 0
