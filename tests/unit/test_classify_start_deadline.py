"""The start deadline: an admitted workload whose pods never start fails at it, with the reason
the pods show and what to do about it (app/domain/classify/start_deadline.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.states import WorkloadState
from tests.support.kube_builders import JobBuilder, make_job
from tests.support.kube_objects import ADMITTED

ADMITTED_AT = datetime.fromisoformat(ADMITTED)
DEADLINE = 300  # seconds, 5m
BEFORE = ADMITTED_AT + timedelta(seconds=DEADLINE - 1)
AFTER = ADMITTED_AT + timedelta(seconds=DEADLINE)

APPLY = "apply the workload again (`aicp apply -f <file>`, or PUT of its spec)."
SUBMIT = (
    "submit it again (`aicp delete workload <name>`, then `aicp apply -f <file>`; or PUT of "
    "the same spec)."
)
HEAD = (
    "Did not start within its start deadline of 5m after admission: {}. The workload failed "
    "and its quota was released; "
)


def _job(**changes: object) -> JobBuilder:
    return make_job(start_deadline_seconds=DEADLINE, **changes)  # type: ignore[arg-type]


CASES = [
    pytest.param(
        lambda: _job(image="ghcr.io/acme/does-not-exist:1").admitted().image_pull_backoff(),
        HEAD.format(
            "the image ghcr.io/acme/does-not-exist:1 could not be pulled (ImagePullBackOff: "
            'Back-off pulling image "ghcr.io/acme/does-not-exist:1")'
        )
        + "fix the image and "
        + APPLY,
        id="image-pull-quotes-the-kubelet",
    ),
    pytest.param(
        lambda: _job().admitted().unschedulable(),
        HEAD.format(
            "no node has 8 nvidia.com/gpu free for a pod (the scheduler says: 0/2 nodes are "
            "available: 2 Insufficient nvidia.com/gpu)"
        )
        + "once a node can hold its pods, "
        + SUBMIT,
        id="unschedulable-quotes-the-scheduler",
    ),
    pytest.param(
        lambda: (
            _job()
            .admitted()
            .unschedulable(
                "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
            )
        ),
        HEAD.format(
            "no node carries the labels of the pool's accelerator flavor (the scheduler says: "
            "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector)"
        )
        + "once a node can hold its pods, "
        + SUBMIT,
        id="no-node-with-the-flavor-labels",
    ),
    pytest.param(
        lambda: _job().admitted().starting(),
        HEAD.format("1 pod still starting")
        + "if it needs longer to start, raise `start_deadline_seconds` and "
        + APPLY,
        id="slow-start-says-how-to-allow-longer",
    ),
]


@pytest.mark.parametrize(("scenario", "reason"), CASES)
def test_past_its_start_deadline_a_workload_that_never_started_fails_saying_why(
    scenario: Callable[[], JobBuilder], reason: str
) -> None:
    result = scenario().build().classify(now=AFTER)

    assert (result.state, result.reason) == (WorkloadState.FAILED, reason)
    assert result.start_deadline_passed


@pytest.mark.parametrize(("scenario", "reason"), CASES)
def test_before_its_start_deadline_it_is_admitted_and_says_when_the_deadline_is(
    scenario: Callable[[], JobBuilder], reason: str
) -> None:
    result = scenario().build().classify(now=BEFORE)

    assert result.state == WorkloadState.ADMITTED
    assert not result.start_deadline_passed
    assert result.start_deadline == AFTER


def test_the_image_reason_says_the_start_deadline_will_end_the_wait() -> None:
    scenario = _job(image="ghcr.io/acme/does-not-exist:1").admitted().image_pull_backoff()

    result = scenario.build().classify(now=BEFORE)

    assert result.reason == (
        "The image ghcr.io/acme/does-not-exist:1 could not be pulled (ImagePullBackOff); check "
        "its name and tag and that the cluster may pull it. It fails, freeing its quota, if it "
        "has not started 5m after admission (its start deadline)."
    )


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(lambda: _job().admitted().running(), id="running"),
        pytest.param(lambda: _job(retries=1).admitted().retrying(exit_code=3), id="retrying"),
        pytest.param(lambda: _job().admitted().succeeded(), id="succeeded"),
        pytest.param(lambda: _job(), id="queued-holds-no-quota"),
        pytest.param(
            lambda: make_job().admitted().image_pull_backoff(), id="spec-without-a-deadline"
        ),
    ],
)
def test_a_workload_that_started_or_holds_no_quota_is_not_failed_by_the_start_deadline(
    scenario: Callable[[], JobBuilder],
) -> None:
    far_later = ADMITTED_AT + timedelta(days=2)

    result = scenario().build().classify(now=far_later)

    assert not result.start_deadline_passed
    assert result.state != WorkloadState.FAILED or "start deadline" not in result.reason


@given(
    deadline=st.integers(min_value=1, max_value=30 * 86400),
    elapsed=st.integers(min_value=0, max_value=31 * 86400),
)
def test_a_never_started_workload_fails_exactly_when_its_deadline_has_passed(
    deadline: int, elapsed: int
) -> None:
    scenario = make_job(start_deadline_seconds=deadline).admitted().image_pull_backoff().build()

    result = scenario.classify(now=ADMITTED_AT + timedelta(seconds=elapsed))

    passed = elapsed >= deadline
    assert result.start_deadline_passed is passed
    assert result.state == (WorkloadState.FAILED if passed else WorkloadState.ADMITTED)
    assert (result.start_deadline is None) is passed
