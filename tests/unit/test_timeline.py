"""The phase timeline of a workload, from its events (app/domain/timeline.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from app.domain.events import EventType
from app.domain.timeline import Step, phase_timeline

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def steps(*pairs: tuple[float, EventType]) -> list[Step]:
    return [Step(at=T0 + timedelta(seconds=s), type=t, generation=1) for s, t in pairs]


def test_a_finished_run_has_one_segment_per_phase_with_its_duration() -> None:
    timeline = phase_timeline(
        steps(
            (0, EventType.ACCEPTED),
            (1, EventType.JOB_CREATED),
            (11, EventType.ADMITTED),
            (12, EventType.STARTED),
            (42, EventType.EVIDENCE_RECORDED),
            (42, EventType.SUCCEEDED),
        ),
        now=T0 + timedelta(hours=1),
    )
    assert [(s.phase, s.seconds) for s in timeline.segments] == [
        ("accepted", 1.0),
        ("queued", 10.0),
        ("admitted", 1.0),
        ("running", 30.0),
    ]
    assert timeline.outcome == "succeeded" and timeline.finished_at == T0 + timedelta(seconds=42)


def test_every_preemption_requeue_and_retry_is_a_segment_of_its_own() -> None:
    timeline = phase_timeline(
        steps(
            (0, EventType.ACCEPTED),
            (1, EventType.JOB_CREATED),
            (2, EventType.ADMITTED),
            (3, EventType.STARTED),
            (10, EventType.PREEMPTED),
            (20, EventType.ADMITTED),
            (21, EventType.STARTED),
            (30, EventType.RESTARTING),
            (40, EventType.REQUEUED),
        ),
        now=T0 + timedelta(seconds=45),
    )
    assert [(s.phase, s.cause) for s in timeline.segments] == [
        ("accepted", "Accepted"),
        ("queued", "JobCreated"),
        ("admitted", "Admitted"),
        ("running", "Started"),
        ("queued", "Preempted"),
        ("admitted", "Admitted"),
        ("running", "Started"),
        ("running", "Restarting"),
        ("queued", "Requeued"),
    ]
    last = timeline.segments[-1]
    assert last.ended_at is None and last.seconds == 5.0 and timeline.outcome is None


def test_a_replace_after_the_end_starts_over_and_deleting_a_finished_one_adds_nothing() -> None:
    finished = steps(
        (0, EventType.ACCEPTED), (1, EventType.FAILED), (5, EventType.DELETION_REQUESTED)
    )
    assert phase_timeline(finished, now=T0).outcome == "failed"
    assert len(phase_timeline(finished, now=T0).segments) == 1
    replaced = steps((0, EventType.ACCEPTED), (1, EventType.FAILED), (5, EventType.SPEC_UPDATED))
    timeline = phase_timeline(replaced, now=T0 + timedelta(seconds=6))
    assert timeline.outcome is None and timeline.segments[-1].phase == "accepted"


@given(
    st.lists(
        st.tuples(st.floats(0, 1e6, allow_nan=False), st.sampled_from(list(EventType))),
        max_size=40,
    ),
    st.floats(0, 2e6, allow_nan=False),
)
def test_segments_are_in_order_never_overlap_and_only_the_last_is_open(
    raw: list[tuple[float, EventType]], later: float
) -> None:
    events = steps(*raw)
    now = T0 + timedelta(seconds=max([s for s, _ in raw], default=0) + later)
    timeline = phase_timeline(events, now=now)
    for before, after in zip(timeline.segments, timeline.segments[1:], strict=False):
        # Back to back, or apart where the workload had ended before it started again.
        assert before.ended_at is not None and before.ended_at <= after.started_at
    for segment in timeline.segments:
        assert segment.seconds >= 0
    open_segments = [s for s in timeline.segments if s.ended_at is None]
    assert len(open_segments) <= 1
    if open_segments:
        assert open_segments[0] is timeline.segments[-1] and timeline.outcome is None
