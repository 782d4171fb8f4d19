"""The planner: queue order, the replay's band, the basis, and what-if admission."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.planning.forecast import (
    NO_BASIS,
    Finished,
    forecast,
    history_of,
    with_arrivals,
)
from app.domain.planning.queue import Demand, Entry, in_queue_order, name_stem
from app.domain.planning.standing import in_words, ordinal, queued_sentence, standing_of
from app.domain.planning.what_if import what_if

NOW = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)
GIB = 1 << 30
QUOTA = Demand(accelerators=8, cpu_millis=64_000, memory_bytes=512 * GIB)


def entry(
    name: str,
    gpus: int,
    *,
    holding: bool = False,
    age: float = 0.0,
    priority: int = 1000,
    max_runtime: int = 86400,
) -> Entry:
    at = NOW - timedelta(seconds=age)
    return Entry(
        id=uuid.uuid4(),
        name=name,
        priority=priority,
        queued_since=at,
        demand=Demand(gpus, 1000, GIB),
        max_runtime_seconds=max_runtime,
        holding=holding,
        held_since=at if holding else None,
    )


HISTORY = history_of([Finished(f"train-{i}", (), 600.0 + 30 * i) for i in range(10)])


def test_stems_drop_trailing_numbers_only() -> None:
    assert name_stem("sweep-lr-0003") == "sweep-lr"
    assert name_stem("train-7b-2") == "train-7b"
    assert name_stem("train") == "train"
    assert name_stem("a-1-2") == "a"


def test_order_is_priority_then_age() -> None:
    old = entry("old", 1, age=100)
    new = entry("new", 1, age=10)
    urgent = entry("urgent", 1, age=1, priority=10000)
    assert [e.name for e in in_queue_order([new, old, urgent])] == ["urgent", "old", "new"]


def test_one_running_one_waiting_starts_when_it_finishes() -> None:
    running = entry("train-a", 8, holding=True, age=300)
    waiting = entry("train-b", 8, age=5)
    found = forecast([running, waiting], QUOTA, HISTORY, NOW)[waiting.id]
    assert found.position == 1 and found.ahead == ()
    assert found.band is not None
    # train-a draws about 600 to 870 s in total (spread by the kernel) and ran 300 s.
    assert NOW + timedelta(seconds=150) <= found.band.earliest
    assert found.band.latest <= NOW + timedelta(seconds=900)
    assert found.basis.startswith("when train-a frees its quota (the oldest admitted 5 min")
    assert "this pool's finished workloads took 10\u201314 min (10)" in found.basis
    stemmed = forecast([entry("train-9", 8, holding=True), waiting], QUOTA, HISTORY, NOW)
    assert "workloads named train-* took 10\u201314 min (10 finished)" in stemmed[waiting.id].basis


def test_no_history_no_band_and_it_says_so() -> None:
    running = entry("solo", 8, holding=True, age=300)
    waiting = entry("next", 8)
    found = forecast([running, waiting], QUOTA, history_of([]), NOW)[waiting.id]
    assert found.band is None
    assert found.basis == NO_BASIS


def test_a_small_one_behind_fills_the_hole() -> None:
    """BestEffortFIFO: a head that does not fit does not block one behind that does."""
    running = entry("train-a", 6, holding=True, age=60)
    big = entry("train-big", 4, age=30)
    small = entry("train-small", 2, age=10)
    found = forecast([running, big, small], QUOTA, HISTORY, NOW)
    assert found[small.id].position == 2
    assert found[small.id].band is not None
    assert found[small.id].band.latest <= NOW + timedelta(seconds=2)  # the admission lag only
    assert found[big.id].band is not None and found[big.id].band.earliest > NOW


def test_submissions_to_come_take_the_hole_a_large_head_waits_for() -> None:
    """A pool that keeps receiving small workloads fills the quota a large head waits for:
    the head's estimate counts them, and its basis says so."""
    running = entry("train-a", 4, holding=True, age=300)
    big = entry("train-big", 8, age=30)
    recent = [entry(f"train-{i}", 4, age=60.0 * i) for i in range(10)]
    alone = forecast([running, big], QUOTA, HISTORY, NOW)[big.id]
    busy = forecast([running, big], QUOTA, with_arrivals(HISTORY, recent, NOW), NOW)[big.id]
    assert alone.band is not None and busy.band is not None
    # Alone, the head starts when train-a ends (600-870 s in all, 300 s run); with a 4-GPU
    # submission a minute, one takes the free half first and holds it ~10 min more.
    assert alone.band.likely <= NOW + timedelta(seconds=700)
    assert busy.band.likely >= alone.band.likely + timedelta(seconds=300)
    assert "with submissions to come at this pool's recent rate (10 in 9 min)" in busy.basis
    assert "submissions to come" not in alone.basis


def test_arrivals_need_enough_recent_submissions_with_history() -> None:
    few = [entry(f"train-{i}", 1, age=10.0 * i) for i in range(4)]
    assert with_arrivals(HISTORY, few, NOW).arrivals is None
    old = [entry(f"train-{i}", 1, age=3600.0 + i) for i in range(10)]
    assert with_arrivals(HISTORY, old, NOW).arrivals is None
    # Ten a minute apart, the newest 4 min ago: quiet for more than three mean gaps (a stop).
    stopped = [entry(f"train-{i}", 1, age=240.0 + 60 * i) for i in range(10)]
    assert with_arrivals(HISTORY, stopped, NOW).arrivals is None
    going = [entry(f"train-{i}", 1, age=120.0 + 60 * i) for i in range(10)]
    assert with_arrivals(HISTORY, going, NOW).arrivals is not None
    unknown = [entry(f"other-{i}", 1, age=10.0 * i) for i in range(10)]
    assert with_arrivals(history_of([]), unknown, NOW).arrivals is None
    mixed = [*few, *(entry(f"other-{i}", 1, age=50.0 + i) for i in range(3))]
    stems_only = history_of([Finished("train-1", (), 60.0)] * 3, pool=[])
    found = with_arrivals(stems_only, mixed, NOW).arrivals
    assert found is not None
    assert found.count == 7 and {e.stem for e in found.kinds} == {"train"}
    assert found.rate == 7 / 52.0


def test_sentence() -> None:
    running = entry("train-a", 8, holding=True, age=60)
    waiting = [entry(f"train-q{i}", 8, age=50 - i) for i in range(3)]
    found = forecast([running, *waiting], QUOTA, HISTORY, NOW)[waiting[2].id]
    sentence = queued_sentence(standing_of(found, NOW), "h100-pool", NOW)
    assert sentence.startswith("Queued 3rd in pool h100-pool; likely to start in ")
    assert sentence.endswith(" min.")
    assert ordinal(1) == "1st" and ordinal(12) == "12th" and ordinal(22) == "22nd"
    assert in_words(NOW + timedelta(minutes=12), NOW + timedelta(minutes=25), NOW) == (
        "in 12\u201325 min"
    )


def test_what_if_admit_queue_preempt() -> None:
    low = entry("train-low", 6, holding=True, age=100, priority=100)
    fits = what_if([low], QUOTA, entry("train-x", 2), HISTORY, NOW, pool="p")
    assert fits.verdict == "admit_now" and fits.position is None
    normal = entry("train-normal", 6, holding=True, age=100)
    waits = what_if([normal], QUOTA, entry("train-x", 4), HISTORY, NOW, pool="p")
    assert waits.verdict == "queue" and waits.position == 1 and waits.eta is not None
    assert "4 accelerators (free 2)" in waits.reason
    urgent = entry("train-x", 4, priority=10000)
    preempts = what_if([low], QUOTA, urgent, HISTORY, NOW, pool="p")
    assert preempts.verdict == "preempt" and preempts.preempts == ["train-low"]


pools = st.lists(
    st.tuples(
        st.integers(0, 8),  # accelerators
        st.booleans(),  # holding
        st.floats(0, 5000),  # age
        st.sampled_from([100, 1000, 10000]),
        st.integers(60, 3000),  # max runtime
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(pools, st.integers(0, 2**16))
def test_bands_are_ordered_never_in_the_past_and_positions_follow_kueue(
    shape: list[tuple[int, bool, float, int, int]], seed: int
) -> None:
    entries: list[Entry] = []
    used = 0
    for index, (gpus, holding, age, priority, runtime) in enumerate(shape):
        holds = holding and used + gpus <= QUOTA.accelerators
        used += gpus if holds else 0
        entries.append(
            entry(
                f"train-{index}",
                gpus,
                holding=holds,
                age=age,
                priority=priority,
                max_runtime=runtime,
            )
        )
    found = forecast(entries, QUOTA, HISTORY, NOW, samples=20, seed=seed)
    waiting = in_queue_order(entries)
    assert [found[e.id].position for e in waiting] == list(range(1, len(waiting) + 1))
    for e in waiting:
        band = found[e.id].band
        assert band is not None  # every workload fits the quota and every one has history
        assert NOW <= band.earliest <= band.likely <= band.latest
        # Each holder frees its quota within its bound, so nothing waits longer than the
        # sum of every bound.
        assert band.latest <= NOW + timedelta(seconds=sum(x.max_runtime_seconds for x in entries))
        assert found[e.id].ahead == tuple(x.name for x in waiting[: found[e.id].position - 1])
