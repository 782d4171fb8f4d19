"""A workload's phase timeline, derived from its event trail.

Each lifecycle event opens a phase and closes the one before it: ``Accepted`` (and a new
generation, ``SpecUpdated``, or a lost Job, ``Pending``) → *accepted*, waiting for its Job;
``JobCreated`` → *queued* in Kueue; ``Admitted`` → *admitted*, quota held, pods starting;
``Started`` → *running*; ``Restarting`` → *running* again (a pod retried); ``Preempted`` and
``Requeued`` → *queued* again; ``Succeeded``/``Failed`` → the end; ``DeletionRequested`` →
*deleting*. So every requeue, preemption and retry is a segment of its own, with its cause.
Audit-only events (``DriftCorrected``, ``EvidenceRecorded``) open nothing. The last phase of an
unfinished workload is open: it lasts until ``now``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from app.domain.events import EventType

if TYPE_CHECKING:
    from collections.abc import Iterable

_OPENS: dict[EventType, str] = {
    EventType.ACCEPTED: "accepted",
    EventType.SPEC_UPDATED: "accepted",
    EventType.PENDING: "accepted",
    EventType.JOB_CREATED: "queued",
    EventType.ADMITTED: "admitted",
    EventType.STARTED: "running",
    EventType.RESTARTING: "running",
    EventType.PREEMPTED: "queued",
    EventType.REQUEUED: "queued",
    EventType.DELETION_REQUESTED: "deleting",
}
_ENDS: dict[EventType, str] = {
    EventType.SUCCEEDED: "succeeded",
    EventType.FAILED: "failed",
    EventType.FINALIZED: "gone",
}


class Segment(msgspec.Struct, kw_only=True):
    """One phase: from the event that opened it (`cause`) to the next one (None: still on)."""

    phase: str
    cause: str
    generation: int
    started_at: datetime
    ended_at: datetime | None
    seconds: float


class Timeline(msgspec.Struct, kw_only=True):
    segments: list[Segment]
    outcome: str | None
    """``succeeded``, ``failed`` or ``gone`` once it ended; None while it goes on."""
    finished_at: datetime | None


class Step(msgspec.Struct, frozen=True):
    """What the timeline needs of an event."""

    at: datetime
    type: EventType
    generation: int


def phase_timeline(events: Iterable[Step], now: datetime) -> Timeline:
    """The timeline of these events (any order; sorted by time, stable)."""
    ordered = sorted(events, key=lambda step: step.at)
    segments: list[Segment] = []
    outcome: str | None = None
    finished_at: datetime | None = None

    def close(at: datetime) -> None:
        if segments and segments[-1].ended_at is None:
            last = segments[-1]
            last.ended_at = max(at, last.started_at)
            last.seconds = (last.ended_at - last.started_at).total_seconds()

    for step in ordered:
        phase = _OPENS.get(step.type)
        end = _ENDS.get(step.type)
        if end is not None:
            close(step.at)
            if outcome is None or end == "gone":
                outcome, finished_at = end, step.at
            continue
        if phase is None:
            continue
        if outcome is not None and step.type is not EventType.DELETION_REQUESTED:
            # A new generation after the end starts over (a replace of a finished workload).
            outcome, finished_at = None, None
        if outcome is not None:
            continue  # deleting a finished workload: nothing runs any more
        close(step.at)
        segments.append(
            Segment(
                phase=phase,
                cause=step.type.value,
                generation=step.generation,
                started_at=step.at,
                ended_at=None,
                seconds=0.0,
            )
        )
    if segments and segments[-1].ended_at is None:
        last = segments[-1]
        last.seconds = max(0.0, (now - last.started_at).total_seconds())
    return Timeline(segments=segments, outcome=outcome, finished_at=finished_at)
