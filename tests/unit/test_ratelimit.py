"""The token buckets behind the request rate limits (app/api/ratelimit.py), on a fake clock."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from app.api.auth import Caller, ProjectRef
from app.api.ratelimit import Buckets, RateLimiter, RateLimits
from app.domain.errors import TooManyRequests
from app.domain.states import Role


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _limits(**changes: float) -> RateLimits:
    values = {
        "reads_per_token": 10.0,
        "writes_per_token": 2.0,
        "reads_per_project": 15.0,
        "writes_per_project": 3.0,
        "auth_failures_per_client": 1.0,
        "burst_seconds": 1.0,
        **changes,
    }
    return RateLimits(**values)  # type: ignore[arg-type]


def _member(project: uuid.UUID) -> Caller:
    return Caller(
        actor="token:x",
        is_admin=False,
        role=Role.EDITOR,
        token_project_id=project,
        project=ProjectRef(project, "p"),
        token_id=uuid.uuid4(),
    )


@settings(max_examples=200, deadline=None)
@given(
    rate=st.floats(0.5, 100),
    burst=st.floats(1, 50),
    gaps=st.lists(st.floats(0, 2), min_size=1, max_size=200),
)
def test_a_bucket_never_admits_more_than_its_burst_plus_what_refilled(
    rate: float, burst: float, gaps: list[float]
) -> None:
    clock = Clock()
    buckets = Buckets(rate, burst, clock=clock)
    admitted = 0
    for gap in gaps:
        clock.now += gap
        wait = buckets.wait("k")
        if wait == 0:
            buckets.spend("k")
            admitted += 1
        else:
            assert wait > 0
        assert admitted <= max(1.0, burst) + rate * clock.now + 1e-6


@settings(max_examples=100, deadline=None)
@given(rate=st.floats(0.1, 50), burst=st.floats(1, 20))
def test_the_wait_it_names_is_exactly_when_a_token_is_back(rate: float, burst: float) -> None:
    clock = Clock()
    buckets = Buckets(rate, burst, clock=clock)
    while buckets.wait("k") == 0:
        buckets.spend("k")
    wait = buckets.wait("k")
    assert 0 < wait <= 1 / rate
    assume(wait * rate > 1e-9)  # not a float rounding step away from a whole token
    clock.now += wait * 0.9
    assert buckets.wait("k") > 0
    clock.now += wait * 0.2
    assert buckets.wait("k") == 0


def test_reads_and_writes_spend_from_separate_buckets_and_the_project_is_shared() -> None:
    clock = Clock()
    limiter = RateLimiter(_limits(), clock=clock)
    project = uuid.uuid4()
    first, second = _member(project), _member(project)
    limiter.admit(first, "POST")
    limiter.admit(first, "POST")
    with pytest.raises(TooManyRequests) as token_spent:
        limiter.admit(first, "POST")
    assert token_spent.value.limit == "token-writes"
    limiter.admit(first, "GET")  # reads are counted apart
    limiter.admit(second, "POST")  # the project's third write
    with pytest.raises(TooManyRequests) as project_spent:
        limiter.admit(second, "DELETE")
    assert project_spent.value.limit == "project-writes"
    assert project_spent.value.retry_after_seconds >= 1
    assert isinstance(project_spent.value.retry_after_seconds, int)
    limiter.admit(_member(uuid.uuid4()), "POST")  # another project is untouched
    clock.now += 1.0
    limiter.admit(second, "POST")


def test_a_refused_request_spends_nothing() -> None:
    clock = Clock()
    limiter = RateLimiter(_limits(writes_per_project=100.0), clock=clock)
    caller = _member(uuid.uuid4())
    for _ in range(2):
        limiter.admit(caller, "POST")
    for _ in range(50):
        with pytest.raises(TooManyRequests):
            limiter.admit(caller, "POST")
    clock.now += 0.5  # one token back: the refusals did not dig a hole
    limiter.admit(caller, "POST")


def test_the_platform_admin_and_a_zero_rate_are_not_limited() -> None:
    limiter = RateLimiter(_limits(reads_per_token=0, reads_per_project=0), clock=Clock())
    admin = Caller(actor="admin", is_admin=True, role=None, token_project_id=None, project=None)
    member = _member(uuid.uuid4())
    for _ in range(1000):
        limiter.admit(admin, "POST")
        limiter.admit(member, "GET")


def test_failed_reads_per_client_address() -> None:
    clock = Clock()
    limiter = RateLimiter(_limits(auth_failures_per_client=2.0), clock=clock)
    for _ in range(2):
        limiter.check_client("10.0.0.1")
        limiter.auth_failed("10.0.0.1")
    with pytest.raises(TooManyRequests) as refused:
        limiter.check_client("10.0.0.1")
    assert refused.value.limit == "client-auth-failures"
    assert "retry in 1 s" in refused.value.detail
    limiter.check_client("10.0.0.2")


def test_at_most_max_keys_buckets_are_kept() -> None:
    buckets = Buckets(1.0, 1.0, max_keys=100, clock=Clock())
    for n in range(1000):
        buckets.spend(n)
    assert len(buckets) == 100
    assert buckets.wait(999) > 0  # the most recent are the ones kept
