"""A Job that vanished from the cluster (its namespace deleted, a cluster replaced under the
database) is one lost attempt, counted once however often the step looks; and what the first
lists lacked reads as one sentence."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from app.reconcile.steps.drift import (
    LOST_JOB_UID,
    attempts_before,
    job_lost,
    recreated_event,
    was_lost,
)
from app.reconcile.steps.evidence import PREVIOUS_ATTEMPTS, RETIRED_JOB_UID
from app.reconcile.steps.healing import Healed
from tests.support.rows import workload_row as row

uids = st.text("abcdef0123456789-", min_size=1, max_size=12)
facts = st.fixed_dictionaries(
    {"job": st.fixed_dictionaries({"name": st.just("train-g1"), "uid": uids})},
    optional={
        "attempts": st.integers(0, 50),
        PREVIOUS_ATTEMPTS: st.integers(0, 50),
        RETIRED_JOB_UID: uids,
    },
)


@given(facts)
def test_a_lost_job_carries_its_attempts_over_once(observed: dict[str, Any]) -> None:
    once = job_lost(row(observed))
    twice = job_lost(row(once))

    assert twice == once  # looking again counts nothing twice
    assert once[RETIRED_JOB_UID] == observed["job"]["uid"]
    if observed.get(RETIRED_JOB_UID) == observed["job"]["uid"]:
        # Its deletion was seen and recorded (evidence kept): not a loss, nothing changes.
        assert once == observed and not was_lost(row(once))
    else:
        assert once[PREVIOUS_ATTEMPTS] == observed.get("attempts", 0)
        assert once[LOST_JOB_UID] == observed["job"]["uid"] and was_lost(row(once))
    assert attempts_before(row(observed)) == once.get(PREVIOUS_ATTEMPTS, 0)


def test_a_row_without_a_job_lost_nothing() -> None:
    assert not was_lost(row({}))
    assert job_lost(row({"attempts": 2})) == {"attempts": 2}


def test_the_recreation_says_whether_the_attempt_was_lost_or_evidenced() -> None:
    lost = recreated_event(row({}), "train-g1", 1, lost=True)
    kept = recreated_event(row({}), "train-g1", 1, lost=False)

    assert "that attempt was lost" in lost.message and "(attempt 2)" in lost.message
    assert "its evidence was recorded" in kept.message and "(attempt 2)" in kept.message
    assert lost.reason == kept.reason == "JobRecreated"


def test_what_the_first_lists_lacked_reads_as_one_sentence() -> None:
    healed = Healed(
        projects=["research"],
        pools=["research/h100-pool"],
        workloads=[f"research/w{i} (RUNNING)" for i in range(12)],
    )

    assert healed.sentence() == (
        "1 project's namespace and 1 pool's queues re-created; 12 workloads' Jobs were gone "
        "(each retried as a new attempt): "
        + ", ".join(f"research/w{i} (RUNNING)" for i in range(10))
        + " and 2 more."
    )
    assert not Healed()
    one = Healed(projects=["a", "b"], pools=[], workloads=["a/w (RUNNING)"])
    assert one.sentence() == (
        "2 projects' namespaces and 0 pools' queues re-created; 1 workload's Job was gone "
        "(each retried as a new attempt): a/w (RUNNING)."
    )
