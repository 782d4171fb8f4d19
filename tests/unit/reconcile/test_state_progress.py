"""A workload's state moves forward unless something really happened, on generated sequences of
observations (caches that lag each other give any order of momentary classifications)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.classify import Classification
from app.domain.classify.evidence import Evidence
from app.domain.states import WorkloadState
from app.reconcile.steps.evidence import hold_progress, milestones

S = WorkloadState
LIVE = [S.QUEUED, S.ADMITTED, S.RUNNING]
observations = st.lists(
    st.tuples(st.sampled_from([*LIVE, S.SUCCEEDED]), st.booleans()), min_size=1, max_size=30
)


def evidence() -> Evidence:
    return Evidence()


def run(sequence: list[tuple[WorkloadState, bool]]) -> tuple[list[tuple[str, int]], list[str]]:
    """Fold observations as the step does; return (state, attempts) written and events."""
    state, reason, attempts = "PENDING", None, 0
    written: list[tuple[str, int]] = []
    events: list[str] = []
    for seen, retried in sequence:
        new_attempts = attempts + (1 if retried else 0)
        new = Classification(seen, f"{seen.value} now", evidence())
        new = hold_progress(state, reason, attempts, new, new_attempts)
        events += [kind for kind, _ in milestones(state, new)]
        state, reason, attempts = new.state.value, new.reason, new_attempts
        written.append((state, attempts))
        if new.state.is_terminal:
            break
    return written, events


@settings(max_examples=500)
@given(observations)
def test_running_never_falls_back_to_admitted_without_a_new_attempt(
    sequence: list[tuple[WorkloadState, bool]],
) -> None:
    written, _ = run(sequence)
    for (before, attempts_before), (after, attempts_after) in itertools.pairwise(written):
        if before == "RUNNING" and after == "ADMITTED":
            assert attempts_after > attempts_before


@settings(max_examples=500)
@given(st.lists(st.sampled_from([*LIVE, S.SUCCEEDED]), min_size=1, max_size=30))
def test_without_retries_or_preemption_started_is_crossed_once(
    states: list[WorkloadState],
) -> None:
    sequence = [(state, False) for state in states if state != S.QUEUED]
    _, events = run(sequence)
    assert events.count("Started") <= 1
    assert events.count("Admitted") <= 1


def test_the_reported_flap_is_held_running_then_succeeds() -> None:
    written, events = run([(S.ADMITTED, False), (S.RUNNING, False), (S.ADMITTED, False),
                           (S.SUCCEEDED, False)])  # fmt: skip
    assert [state for state, _ in written] == ["ADMITTED", "RUNNING", "RUNNING", "SUCCEEDED"]
    assert "Restarting" not in events and events.count("Started") == 1


def test_a_retried_pod_may_go_back_to_admitted() -> None:
    written, events = run([(S.RUNNING, False), (S.ADMITTED, True), (S.RUNNING, False)])
    assert [state for state, _ in written] == ["RUNNING", "ADMITTED", "RUNNING"]
    assert "Restarting" in events


def test_preemption_goes_back_to_queued() -> None:
    written, events = run([(S.RUNNING, False), (S.QUEUED, False)])
    assert written[-1][0] == "QUEUED" and events[-1] in ("Preempted", "Requeued")


def test_a_workload_failed_at_its_start_deadline_never_crosses_started() -> None:
    # The Job has a start time (Kueue unsuspended it), but no pod of it ever ran.
    job_started = Evidence(started_at=datetime(2026, 8, 1, 10, 0, 5, tzinfo=UTC))
    failed = Classification(S.FAILED, "did not start", job_started, start_deadline_passed=True)

    assert [kind for kind, _ in milestones(S.ADMITTED, failed)] == ["Failed"]
    assert [kind for kind, _ in milestones(S.QUEUED, failed)] == ["Admitted", "Failed"]
