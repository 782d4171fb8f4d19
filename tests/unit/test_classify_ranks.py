"""Classification of a multi-node workload: the failed rank named, OOM per rank, per-rank
evidence, and Kueue's all-or-nothing start giving up."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from app.domain.classify.evidence import Evidence, context_for
from app.domain.states import WorkloadState
from app.domain.workload_resources import RankFacts
from tests.support.kube_builders import make_job
from tests.support.kube_objects import GPU, H100_PRODUCT


def test_the_first_rank_to_fail_is_named_with_its_pod_node_and_code() -> None:
    builder = make_job(nodes=4, retries=2).admitted().rank_failed(2, exit_code=1)
    result = builder.build().classify()

    pod = builder.pods[2]["metadata"]["name"]
    assert result.state == WorkloadState.FAILED
    assert result.reason == (
        f"Rank 2 (pod {pod} on gpu-node-1) exited with code 1; all 4 ranks were stopped "
        "(attempt 1 of 3)."
    )


def test_the_attempt_counts_the_jobs_before_it() -> None:
    scenario = make_job(nodes=2, retries=2).admitted().rank_failed(1).build()
    scenario.context = context_for(
        make_job(nodes=2, retries=2).spec, accelerator_resource=GPU, previous_attempts=2
    )

    assert "(attempt 3 of 3)" in scenario.classify().reason


def test_an_oom_killed_rank_names_the_rank_and_its_memory_limit() -> None:
    result = make_job(nodes=2, memory="8Gi").admitted().rank_failed(1, 137, oom=True).build()
    reason = result.classify().reason

    assert reason.startswith("Rank 1 (pod ")
    assert "ran out of memory and was killed (OOMKilled): its memory limit is 8Gi" in reason
    assert "all 2 ranks were stopped (attempt 1 of 1)" in reason


def test_every_rank_has_its_pod_node_product_and_exit_code() -> None:
    evidence = make_job(nodes=2).admitted().rank_failed(0, 3).build().classify().evidence

    assert [(r.rank, r.node, r.exit_code) for r in evidence.ranks] == [
        (0, "gpu-node-1", 3),
        (1, "gpu-node-2", 143),
    ]
    assert all(r.accelerator_product == H100_PRODUCT for r in evidence.ranks)
    assert evidence.attempts == 1  # one Job is one attempt of all ranks


def test_a_single_node_workload_has_no_ranks() -> None:
    evidence = make_job().admitted().running().build().classify().evidence

    assert evidence.ranks == []


def test_kueue_giving_up_on_the_all_or_nothing_start_says_how_many_pods_ran() -> None:
    builder = make_job(nodes=4).admitted().running()
    for pod in builder.pods[3:]:
        pod["status"]["phase"] = "Pending"
    builder.job["status"]["startTime"] = "2026-08-01T10:00:00Z"
    builder.pods_ready_timeout("2026-08-01T10:05:00Z")
    result = builder.build().classify()

    assert result.state == WorkloadState.QUEUED
    assert result.reason == (
        "Requeued: 3 of 4 pods were running after 5m; the workload goes back to the queue."
    )


def test_once_the_evicted_pods_are_gone_the_requeue_does_not_guess_how_many_ran() -> None:
    builder = make_job(nodes=4).admitted()
    builder.pods = []
    builder.job["status"]["startTime"] = "2026-08-01T10:00:00Z"
    builder.pods_ready_timeout("2026-08-01T10:05:00Z")

    assert builder.build().classify().reason == (
        "Requeued: not all 4 pods were running after 5m; the workload goes back to the queue."
    )


BEGAN = datetime(2026, 8, 1, 10, 0, tzinfo=UTC)


def _evicted_after(nodes: int, evicted_at: str, ranks: list[RankFacts]) -> str:
    """The reason of a gang Kueue suspended at `evicted_at` (its pods gone, its start time
    cleared), whose earlier observations recorded `ranks` and a start at `BEGAN`."""
    builder = make_job(nodes=nodes).admitted()
    builder.pods = []
    builder.job["status"].pop("startTime", None)
    builder.pods_ready_timeout(evicted_at)
    scenario = builder.build()
    earlier = Evidence(started_at=BEGAN, ranks=ranks)
    scenario.context = msgspec.structs.replace(scenario.context, earlier=earlier)
    return scenario.classify().reason


def test_after_the_eviction_the_recorded_ranks_and_start_still_say_how_many_ran() -> None:
    # Kueue suspended the Job: its pods are gone and its start time is cleared; what aicp
    # recorded before the eviction says how many ran and since when.
    ranks = [RankFacts(rank=r, phase="Pending" if r == 3 else "Running") for r in range(4)]
    assert _evicted_after(4, "2026-08-01T10:05:00Z", ranks) == (
        "Requeued: 3 of 4 pods were running after 5m; the workload goes back to the queue."
    )


def test_a_rank_recorded_as_stopped_by_the_eviction_still_counts_as_having_run() -> None:
    # On a real cluster the last observation before the suspension may already see the
    # evicted pods stopped: a rank whose container started was running all the same.
    ranks = [
        RankFacts(rank=0, phase="Failed", started_at=BEGAN),
        RankFacts(rank=1, phase="Failed"),
    ]
    assert _evicted_after(2, "2026-08-01T10:00:20Z", ranks) == (
        "Requeued: 1 of 2 pods were running after 20s; the workload goes back to the queue."
    )
