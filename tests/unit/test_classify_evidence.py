"""The evidence classify reports: where and how a workload ran, as docs/API.md's status shows it."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from app.domain.classify.evidence import Evidence, merge_evidence
from app.domain.workload_resources import (
    AcceleratorFacts,
    Admission,
    JobRef,
    KueueWorkloadRef,
    ObservedFacts,
)
from tests.support.kube_builders import make_job, make_node

AT = datetime(2026, 8, 1, 10, 0, 1, tzinfo=UTC)
STARTED = datetime(2026, 8, 1, 10, 0, 5, tzinfo=UTC)
FINISHED = datetime(2026, 8, 1, 10, 2, 5, tzinfo=UTC)


def test_a_successful_run_records_job_admission_node_accelerator_and_times() -> None:
    scenario = make_job("train-7b").admitted().succeeded(node="gpu-node-1").build()
    assert scenario.job is not None
    job_uid = scenario.job["metadata"]["uid"]

    evidence = scenario.classify().evidence

    assert evidence == Evidence(
        job=JobRef(name=scenario.job["metadata"]["name"], uid=scenario.job["metadata"]["uid"]),
        admission=Admission(
            cluster_queue="aicp-research-h100-pool", flavor="h100-80g", admitted_at=AT
        ),
        nodes=["gpu-node-1"],
        accelerator=AcceleratorFacts(product="NVIDIA-H100-80GB-HBM3", memory_mib=81920, count=8),
        attempts=1,
        started_at=STARTED,
        finished_at=FINISHED,
        exit_code=0,
        kueue_workload=KueueWorkloadRef(
            created_at=datetime(2026, 8, 1, 10, 0, 0, tzinfo=UTC), uid=f"wl-{job_uid}"
        ),
    )


def test_the_evidence_encodes_to_the_api_status_field_names() -> None:
    evidence = make_job().admitted().running(node="gpu-node-1").build().classify().evidence

    encoded = msgspec.json.decode(msgspec.json.encode(evidence))

    assert set(encoded) == {
        "job",
        "admission",
        "nodes",
        "accelerator",
        "attempts",
        "started_at",
        "finished_at",
        "exit_code",
        "ranks",
        "queue",
        "kueue_workload",  # the planner's (Kueue's queue order), not shown by the API
    }
    assert encoded["admission"]["admitted_at"] == "2026-08-01T10:00:01Z"
    assert encoded["accelerator"] == {
        "product": "NVIDIA-H100-80GB-HBM3",
        "memory_mib": 81920,
        "count": 8,
    }
    assert encoded["finished_at"] is None and encoded["exit_code"] is None


def test_stored_evidence_reads_back_as_the_api_status_facts() -> None:
    evidence = make_job().admitted().succeeded(node="gpu-node-1").build().classify().evidence

    stored = msgspec.json.encode(evidence)

    assert msgspec.json.decode(stored, type=ObservedFacts) == evidence


def test_accelerator_memory_comes_from_the_node_label_of_a_real_gfd_node() -> None:
    builder = make_job().admitted().running(node="dgx-7")
    builder.nodes = [make_node("dgx-7", memory_mib=81559)]

    accelerator = builder.build().classify().evidence.accelerator

    assert accelerator == AcceleratorFacts(
        product="NVIDIA-H100-80GB-HBM3", memory_mib=81559, count=8
    )


def test_the_accelerator_count_covers_every_replica() -> None:
    evidence = make_job(accelerators=4, replicas=2).admitted().running().build().classify().evidence

    assert evidence.accelerator is not None and evidence.accelerator.count == 8
    assert evidence.nodes == ["gpu-node-1", "gpu-node-2"]


def test_a_cpu_only_workload_has_no_accelerator_evidence() -> None:
    evidence = make_job(accelerators=0).admitted().running().build().classify().evidence

    assert evidence.accelerator is None


def test_a_failed_run_records_the_exit_code_and_every_attempt() -> None:
    evidence = make_job(retries=1).admitted().failed(exit_code=42).build().classify().evidence

    assert evidence.exit_code == 42
    assert evidence.attempts == 2
    assert evidence.finished_at == FINISHED


def test_an_oom_kill_records_exit_code_137() -> None:
    evidence = make_job().admitted().oom_killed().build().classify().evidence

    assert evidence.exit_code == 137


def test_a_queued_workload_has_a_job_but_no_admission_nodes_or_attempts() -> None:
    evidence = make_job().waiting_for_quota().build().classify().evidence

    assert evidence.job is not None
    assert evidence.admission is None and evidence.nodes == [] and evidence.attempts == 0
    assert evidence.accelerator is None and evidence.started_at is None


def test_preemption_clears_the_admission_and_merge_keeps_what_was_recorded() -> None:
    recorded = make_job().admitted().running(node="gpu-node-1").build().classify().evidence
    after = make_job().admitted().running(node="gpu-node-1").preempted().build().classify().evidence

    merged = merge_evidence(recorded, after)

    assert after.admission is None and after.nodes == []
    assert merged.admission == recorded.admission
    assert merged.nodes == ["gpu-node-1"]
    assert merged.attempts == 1


def test_merging_after_a_recreated_job_keeps_old_nodes_and_takes_new_facts() -> None:
    first = make_job().admitted().running(node="gpu-node-1").build().classify().evidence
    second = make_job().admitted().succeeded(node="gpu-node-2").build().classify().evidence

    merged = merge_evidence(first, second)

    assert merged.nodes == ["gpu-node-1", "gpu-node-2"]
    assert merged.exit_code == 0 and merged.finished_at == FINISHED


def test_merging_after_a_group_restart_drops_how_the_earlier_job_ended() -> None:
    ended = make_job().admitted().failed(node="gpu-node-1").build().classify().evidence
    assert ended.exit_code is not None and ended.finished_at is not None and ended.job
    first = msgspec.structs.replace(ended, job=JobRef(name=ended.job.name, uid="first"))
    starting = make_job().admitted().build().classify().evidence
    assert starting.job is not None
    second = msgspec.structs.replace(starting, job=JobRef(name=starting.job.name, uid="second"))

    merged = merge_evidence(first, second)

    assert merged.job == second.job
    assert merged.exit_code is None and merged.finished_at is None and merged.ranks == []
    assert merged.nodes == ["gpu-node-1"]  # where the workload ran, over every attempt


def test_the_evidence_records_the_kueue_workload_as_kueue_orders_it() -> None:
    built = make_job().build()
    evidence = built.classify().evidence

    assert built.workload is not None
    assert evidence.kueue_workload is not None
    assert evidence.kueue_workload.uid == built.workload["metadata"]["uid"]
    assert evidence.kueue_workload.created_at == datetime.fromisoformat(
        built.workload["metadata"]["creationTimestamp"]
    )
    # Kept from the record while the objects no longer show it (e.g. a Job deleted by hand).
    merged = merge_evidence(evidence, msgspec.structs.replace(evidence, kueue_workload=None))
    assert merged.kueue_workload == evidence.kueue_workload
