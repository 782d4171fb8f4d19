"""The calibration of the replay's band by the pool's scored estimates (split-conformal)."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.planning.calibration import (
    MIN_SCORED,
    RESOLUTION,
    Band,
    Calibration,
    Scored,
    inside_band,
)
from app.domain.planning.forecast import NO_BASIS, Finished, forecast, history_of
from app.domain.planning.queue import Demand, Entry

NOW = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)
GIB = 1 << 30
QUOTA = Demand(accelerators=8, cpu_millis=64_000, memory_bytes=512 * GIB)


def _scored(offsets: list[tuple[float, float, float, float, float]]) -> list[Scored]:
    """Each offset: seconds before NOW the estimate was made, then its p10, p50, p90 and the
    admission, in seconds after it was made."""
    found = []
    for ago, low, mid, high, started in offsets:
        made = NOW - timedelta(seconds=ago)
        found.append(
            Scored(
                made,
                made + timedelta(seconds=low),
                made + timedelta(seconds=mid),
                made + timedelta(seconds=high),
                made + timedelta(seconds=started),
            )
        )
    return found


def test_no_calibration_below_the_minimum_history() -> None:
    few = _scored([(600, 10, 20, 30, 25)] * (MIN_SCORED - 1))
    assert Calibration.of(few) is None
    assert Calibration.of([*few, *few[:1]]) is not None


def test_admissions_late_by_the_same_amount_move_the_band_to_cover_them() -> None:
    # The replay said 10-30 s and Kueue always admitted 40 s after (lag it does not model).
    calibration = Calibration.of(_scored([(900, 10, 20, 30, 40)] * 50))
    assert calibration is not None
    replay = Band(
        NOW + timedelta(seconds=10), NOW + timedelta(seconds=20), NOW + timedelta(seconds=30)
    )
    band = calibration.apply(replay, NOW)
    admitted = NOW + timedelta(seconds=40)
    assert inside_band(band.earliest, band.latest, admitted)
    assert band.likely > replay.likely


def test_a_band_wider_than_the_errors_narrows() -> None:
    calibration = Calibration.of(_scored([(900, 0, 50, 100, 50)] * 40))
    assert calibration is not None
    replay = Band(NOW, NOW + timedelta(seconds=50), NOW + timedelta(seconds=100))
    band = calibration.apply(replay, NOW + timedelta(seconds=0))
    assert band.latest - band.earliest < replay.latest - replay.earliest


def test_inside_counts_the_whole_second_kueue_wrote() -> None:
    earliest = NOW + timedelta(seconds=0.4)
    assert inside_band(earliest, earliest + timedelta(seconds=5), NOW)  # [NOW, NOW + 1 s)
    assert not inside_band(earliest, earliest + timedelta(seconds=5), NOW - RESOLUTION)
    assert not inside_band(NOW, NOW + timedelta(seconds=5), NOW + timedelta(seconds=6))


def test_calibration_covers_about_its_share_of_new_errors_like_the_past_ones() -> None:
    rng = random.Random(3)

    def one() -> tuple[float, float, float, float, float]:
        # The replay says 20-40 s; admissions come 30 s +- a skewed spread it under-states.
        return (300.0, 20.0, 30.0, 40.0, 30.0 + rng.expovariate(1 / 15) - 5.0)

    calibration = Calibration.of(_scored([one() for _ in range(200)]))
    assert calibration is not None
    replay = Band(
        NOW + timedelta(seconds=20), NOW + timedelta(seconds=30), NOW + timedelta(seconds=40)
    )
    band = calibration.apply(replay, NOW)
    fresh = [NOW + timedelta(seconds=one()[4]) for _ in range(2000)]
    share = sum(inside_band(band.earliest, band.latest, t) for t in fresh) / len(fresh)
    # A 95 % band (2.5 % missed each side) for errors like the past ones.
    assert 0.9 <= share <= 0.99


seconds = st.floats(min_value=-3600, max_value=3600, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(
    past=st.lists(
        st.tuples(
            st.floats(min_value=0, max_value=7200),
            st.floats(min_value=0, max_value=600),
            st.floats(min_value=0, max_value=600),
            st.floats(min_value=0, max_value=600),
            seconds,
        ),
        min_size=MIN_SCORED,
        max_size=60,
    ),
    low=st.floats(min_value=0, max_value=3600),
    widths=st.tuples(
        st.floats(min_value=0, max_value=3600), st.floats(min_value=0, max_value=3600)
    ),
)
def test_a_calibrated_band_is_ordered_and_never_in_the_past(
    past: list[tuple[float, float, float, float, float]],
    low: float,
    widths: tuple[float, float],
) -> None:
    ordered = [(ago, *sorted((a, b, c)), started) for ago, a, b, c, started in past]
    calibration = Calibration.of(_scored(ordered))
    assert calibration is not None
    earliest = NOW + timedelta(seconds=low)
    replay = Band(
        earliest, earliest + timedelta(seconds=widths[0]), earliest + timedelta(seconds=sum(widths))
    )
    band = calibration.apply(replay, NOW)
    assert NOW <= band.earliest <= band.likely <= band.latest


def _entry(name: str, gpus: int, *, holding: bool = False, age: float = 0.0) -> Entry:
    at = NOW - timedelta(seconds=age)
    return Entry(
        id=uuid.uuid4(),
        name=name,
        priority=1000,
        queued_since=at,
        demand=Demand(gpus, 1000, GIB),
        max_runtime_seconds=86400,
        holding=holding,
        held_since=at if holding else None,
    )


def test_a_forecast_keeps_the_replays_band_and_says_it_is_calibrated() -> None:
    history = history_of([Finished(f"train-{i}", (), 600.0 + 30 * i) for i in range(10)])
    running = _entry("train-a", 8, holding=True, age=60)
    waiting = _entry("train-b", 8)
    calibration = Calibration.of(_scored([(900, 10, 20, 30, 40)] * 30))
    plain = forecast([running, waiting], QUOTA, history, NOW)[waiting.id]
    found = forecast([running, waiting], QUOTA, history, NOW, calibration=calibration)[waiting.id]
    assert found.replay_band == plain.band == plain.replay_band
    assert found.band != plain.band
    assert "calibrated on this pool's last 30 scored estimates" in found.basis
    assert "calibrated" not in plain.basis


def test_no_history_no_band_even_calibrated() -> None:
    running = _entry("train-a", 8, holding=True, age=60)
    waiting = _entry("train-b", 8)
    calibration = Calibration.of(_scored([(900, 10, 20, 30, 40)] * 30))
    found = forecast([running, waiting], QUOTA, history_of([]), NOW, calibration=calibration)
    assert found[waiting.id].band is None
    assert found[waiting.id].replay_band is None
    assert found[waiting.id].basis == NO_BASIS


shares = st.floats(min_value=-5, max_value=5, allow_nan=False)


@settings(max_examples=100, deadline=None)
@given(
    shape=st.lists(
        st.tuples(st.integers(1, 8), st.booleans(), st.floats(0, 3000), st.booleans()),
        min_size=1,
        max_size=12,
    ),
    moves=st.tuples(shares, shares, shares),
    seed=st.integers(0, 2**16),
)
def test_calibrated_forecasts_are_ordered_never_in_the_past_and_only_with_a_basis(
    shape: list[tuple[int, bool, float, bool]], moves: tuple[float, float, float], seed: int
) -> None:
    history = history_of([Finished(f"known-{i}", (), 60.0 + 45 * i) for i in range(5)], pool=[])
    entries, used = [], 0
    for index, (gpus, holding, age, known) in enumerate(shape):
        holds = holding and used + gpus <= QUOTA.accelerators
        used += gpus if holds else 0
        name = f"{'known' if known else 'new'}-{index}"
        entries.append(_entry(name, gpus, holding=holds, age=age))
    calibration = Calibration(samples=MIN_SCORED, low=moves[0], high=moves[1], centre=moves[2])
    found = forecast(entries, QUOTA, history, NOW, samples=20, seed=seed, calibration=calibration)
    for one in found.values():
        if one.band is None:
            assert one.replay_band is None
            continue
        assert NOW <= one.band.earliest <= one.band.likely <= one.band.latest
        assert "calibrated" in one.basis and not one.basis.startswith("no estimate")
