"""What the informer caches keep of a Job, a Pod and a Kueue Workload (`slimmed`): every field
aicp reads, and nothing of a spec's command, args and environment however large they are."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.kube_objects import field, main_container, slimmed
from app.domain.render import JobIdentity, declared_drift, render_job, render_job_metadata_only
from app.domain.specs import WorkloadSpec

GPU = "nvidia.com/gpu"
IDENTITY = JobIdentity(
    project="research", workload="train-7b", uid="3f2a1c4e-9b8d-4c7a-8e6f-112233445566",
    generation=3,
)  # fmt: skip

texts = st.text(alphabet="abcxyz0189 -=", max_size=4096)
env_keys = st.from_regex(r"[A-Z_][A-Z0-9_]{0,20}", fullmatch=True)


def spec(env: dict[str, str], args: list[str], command: list[str]) -> WorkloadSpec:
    return WorkloadSpec(
        name="train-7b", compute_pool="h100-pool", image="ghcr.io/acme/train:1.4",
        command=command or ["python"], args=args, env=env, accelerators=8, cpu="32",
        memory="256Gi", replicas=2, max_runtime_seconds=3600, retries=2,
    )  # fmt: skip


def live_job(manifest: dict[str, Any]) -> dict[str, Any]:
    """The Job as the apiserver hands it back: with managed fields, a uid and a status."""
    job = copy.deepcopy(manifest)
    job["metadata"].update(
        uid="9d1c", resourceVersion="42",
        managedFields=[{"manager": "aicp", "fieldsV1": {"f:spec": {"f:template": {}}}}],
    )  # fmt: skip
    job["status"] = {"active": 1, "startTime": "2026-01-01T00:00:00Z"}
    return job


@settings(max_examples=60, deadline=None)
@given(
    env=st.dictionaries(env_keys, texts, max_size=64),
    args=st.lists(texts, max_size=64),
    command=st.lists(texts, max_size=8),
)
def test_a_slimmed_job_and_pod_keep_what_aicp_reads_and_none_of_the_spec_payload(
    env: dict[str, str], args: list[str], command: list[str]
) -> None:
    workload = spec(env, args, command)
    job = live_job(render_job(IDENTITY, workload, GPU))
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p", "labels": job["spec"]["template"]["metadata"]["labels"]},
        "spec": {**copy.deepcopy(job["spec"]["template"]["spec"]), "nodeName": "gpu-node-1"},
        "status": {"phase": "Running"},
    }
    before = copy.deepcopy(job), copy.deepcopy(pod)

    slim_job, slim_pod = slimmed(job), slimmed(pod)

    # drift is checked on the metadata, which is whole (but its managed fields)
    desired = render_job_metadata_only(IDENTITY, workload)
    assert declared_drift(desired, slim_job) == []
    assert "managedFields" not in slim_job["metadata"]
    for path in (("spec", "completions"), ("spec", "parallelism"), ("spec", "backoffLimit"),
                 ("spec", "suspend"), ("status",), ("metadata", "labels"),
                 ("metadata", "finalizers"), ("spec", "template", "metadata")):  # fmt: skip
        assert field(slim_job, *path) == field(before[0], *path)
    for original, slim in ((before[0]["spec"]["template"], slim_job["spec"]["template"]),
                           (before[1], slim_pod)):  # fmt: skip
        kept, full = main_container(slim), main_container(original)
        assert kept is not None and full is not None
        assert {k: kept.get(k) for k in ("name", "image", "resources")} == {
            k: full.get(k) for k in ("name", "image", "resources")
        }
        assert not {"env", "args", "command"} & set(kept)
    assert field(slim_pod, "spec", "nodeName") == "gpu-node-1"
    assert slim_pod["status"] == before[1]["status"]
    assert len(json.dumps(slim_job)) < 4096  # whatever the spec's size


def test_a_slimmed_kueue_workload_keeps_its_status_and_drops_its_pod_templates() -> None:
    status = {"admission": {"clusterQueue": "q", "podSetAssignments": [{"name": "main"}]}}
    workload = {
        "kind": "Workload",
        "metadata": {"name": "w", "ownerReferences": [{"uid": "9d1c"}]},
        "spec": {"podSets": [{"name": "main", "count": 2, "template": {"spec": {"x": 1}}}]},
        "status": status,
    }
    slim = slimmed(copy.deepcopy(workload))
    assert slim["spec"]["podSets"] == [{"name": "main", "count": 2}]
    assert slim["status"] == status and slim["metadata"] == workload["metadata"]
