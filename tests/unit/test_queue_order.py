"""The planner's queue order is Kueue's: priority, then the Workload's creation second, then
its uid (not when aicp accepted the workload), so a burst comes in Kueue's order."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from app.domain.planning.queue import Demand, Entry, in_queue_order

SECOND = datetime(2026, 8, 1, 10, 0, 0, tzinfo=UTC)


def _entry(name: str, kueue_uid: str, priority: int = 1000) -> Entry:
    return Entry(
        id=uuid.uuid4(),
        name=name,
        priority=priority,
        queued_since=SECOND,
        demand=Demand(8, 1000, 1 << 30),
        max_runtime_seconds=3600,
        kueue_uid=kueue_uid,
    )


def test_equal_priority_in_one_second_is_ordered_by_the_workloads_uids() -> None:
    first, second, third = _entry("a", "f0"), _entry("b", "0a"), _entry("c", "7c")
    urgent = _entry("urgent", "ff", priority=10000)

    order = in_queue_order([first, second, third, urgent])

    assert [e.name for e in order] == ["urgent", "b", "c", "a"]
