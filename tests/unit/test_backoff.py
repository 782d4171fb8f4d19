"""The one backoff: exponential delays with equal jitter, capped (`app.backoff`)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.backoff import Backoff


def test_backoff_grows_with_jitter_up_to_its_cap_and_resets() -> None:
    backoff = Backoff(0.1, 1.0)
    delays = [backoff.next() for _ in range(8)]
    assert 0.05 <= delays[0] <= 0.1
    assert 0.1 <= delays[1] <= 0.2
    assert all(0.5 <= d <= 1.0 for d in delays[4:])
    assert backoff.attempt == 8
    backoff.reset()
    assert backoff.next() <= 0.1


@given(
    base=st.floats(min_value=0.001, max_value=10.0),
    factor=st.floats(min_value=1.0, max_value=1000.0),
    failures=st.integers(min_value=-5, max_value=10_000),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_every_delay_lies_between_half_its_ceiling_and_the_ceiling(
    base: float, factor: float, failures: int, seed: int
) -> None:
    cap = base * factor
    backoff = Backoff(base, cap, rng=random.Random(seed))
    ceiling = min(cap, base * 2.0 ** (max(failures, 1) - 1)) if failures < 64 else cap
    delay = backoff.delay(failures)
    assert ceiling / 2 <= delay <= ceiling
    assert delay <= cap


def test_peers_failing_together_do_not_retry_in_step() -> None:
    delays = {round(Backoff(1.0, 8.0).delay(3), 6) for _ in range(50)}
    assert len(delays) > 40


@pytest.mark.parametrize(("base", "cap"), [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0)])
def test_a_backoff_without_a_positive_base_under_its_cap_is_refused(
    base: float, cap: float
) -> None:
    with pytest.raises(ValueError, match="base"):
        Backoff(base, cap)
