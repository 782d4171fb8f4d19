"""The Job of a workload generation, and the metadata-only body aicp re-applies to it."""

from __future__ import annotations

import kubernetes_validate
import pytest

from app.domain.render import (
    JobIdentity,
    render_job,
    render_job_labels,
    render_job_metadata_only,
)
from app.domain.specs import WorkloadSpec
from tests.support.kube_objects import GPU
from tests.support.kube_schemas import check_metadata, validate_builtin
from tests.support.rendering import IDENTITY, UID

SPEC = WorkloadSpec(
    name="train-7b",
    compute_pool="h100-pool",
    image="ghcr.io/acme/train:1.4",
    command=["python", "train.py"],
    args=["--epochs", "3"],
    env={"WANDB_MODE": "offline", "KUBESIM_RUN_SECONDS": "5"},
    accelerators=8,
    cpu="32",
    memory="256Gi",
    replicas=2,
    max_runtime_seconds=3600,
    retries=2,
    priority="high",
    labels={"team": "nlp"},
)


def _container(job: dict[str, object]) -> dict[str, object]:
    spec = job["spec"]
    assert isinstance(spec, dict)
    containers = spec["template"]["spec"]["containers"]
    assert len(containers) == 1
    container = containers[0]
    assert isinstance(container, dict)
    return container


def test_the_job_is_a_valid_suspended_job_with_the_evidence_finalizer() -> None:
    job = render_job(IDENTITY, SPEC, GPU)

    validate_builtin(job)
    check_metadata(job, namespaced=True)
    assert job["metadata"]["name"] == "train-7b-3f2a1c-g1"
    assert job["metadata"]["namespace"] == "aicp-research"
    assert job["metadata"]["finalizers"] == ["aicp.dev/evidence"]
    assert job["spec"]["suspend"] is True


def test_the_job_carries_identity_queue_and_priority_labels_over_the_users_own() -> None:
    labels = render_job(IDENTITY, SPEC, GPU)["metadata"]["labels"]

    assert labels == {
        "aicp.dev/generation": "1",
        "aicp.dev/project": "research",
        "aicp.dev/uid": UID,
        "aicp.dev/workload": "train-7b",
        "app.kubernetes.io/managed-by": "aicp",
        "kueue.x-k8s.io/priority-class": "aicp-high",
        "kueue.x-k8s.io/queue-name": "h100-pool",
        "team": "nlp",
    }


def test_a_user_label_cannot_override_what_aicp_and_kueue_rely_on() -> None:
    sneaky = WorkloadSpec(
        name="train-7b",
        compute_pool="h100-pool",
        image="busybox",
        labels={"aicp.dev/uid": "forged", "app.kubernetes.io/managed-by": "someone"},
    )

    labels = render_job_labels(IDENTITY, sneaky)

    assert labels["aicp.dev/uid"] == UID
    assert labels["app.kubernetes.io/managed-by"] == "aicp"


def test_replicas_retries_and_max_runtime_map_onto_the_job_spec() -> None:
    spec = render_job(IDENTITY, SPEC, GPU)["spec"]

    assert spec["parallelism"] == spec["completions"] == 2
    assert spec["backoffLimit"] == 2
    assert spec["activeDeadlineSeconds"] == 3600
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_the_main_container_requests_and_limits_cpu_memory_and_accelerators() -> None:
    container = _container(render_job(IDENTITY, SPEC, GPU))

    assert container["name"] == "main"
    assert container["image"] == "ghcr.io/acme/train:1.4"
    assert container["command"] == ["python", "train.py"]
    assert container["args"] == ["--epochs", "3"]
    expected = {"cpu": "32", "memory": "256Gi", GPU: "8"}
    assert container["resources"] == {"requests": expected, "limits": expected}


def test_a_cpu_only_workload_requests_no_accelerator_resource() -> None:
    spec = WorkloadSpec(name="prep", compute_pool="h100-pool", image="busybox")

    job = render_job(IDENTITY, spec, GPU)

    validate_builtin(job)
    container = _container(job)
    assert container["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert "command" not in container and "args" not in container


def test_env_is_sorted_and_names_the_workload_generation() -> None:
    env = _container(render_job(IDENTITY, SPEC, GPU))["env"]

    assert env == [
        {"name": "AICP_GENERATION", "value": "1"},
        {"name": "AICP_PROJECT", "value": "research"},
        {"name": "AICP_WORKLOAD", "value": "train-7b"},
        {"name": "KUBESIM_RUN_SECONDS", "value": "5"},
        {"name": "WANDB_MODE", "value": "offline"},
    ]


def test_pods_carry_the_identity_labels_but_not_kueues_queue_labels() -> None:
    template_labels = render_job(IDENTITY, SPEC, GPU)["spec"]["template"]["metadata"]["labels"]

    assert template_labels["aicp.dev/uid"] == UID
    assert template_labels["aicp.dev/generation"] == "1"
    assert "kueue.x-k8s.io/queue-name" not in template_labels


def test_the_job_leaves_node_selection_to_kueue() -> None:
    pod_spec = render_job(IDENTITY, SPEC, GPU)["spec"]["template"]["spec"]

    assert "nodeSelector" not in pod_spec and "tolerations" not in pod_spec


def test_a_new_generation_is_a_new_job_name() -> None:
    second = JobIdentity(project="research", workload="train-7b", uid=UID, generation=2)

    job = render_job(second, SPEC, GPU)

    assert job["metadata"]["name"] == "train-7b-3f2a1c-g2"
    assert job["metadata"]["labels"]["aicp.dev/generation"] == "2"


@pytest.mark.parametrize(
    "generation",
    [pytest.param(1, id="first"), pytest.param(10**11, id="huge-generation")],
)
def test_the_longest_workload_and_project_names_still_give_a_valid_job(generation: int) -> None:
    identity = JobIdentity(project="p" * 30, workload="w" * 40, uid=UID, generation=generation)
    spec = WorkloadSpec(name="w" * 40, compute_pool="q" * 30, image="busybox")

    job = render_job(identity, spec, GPU)

    validate_builtin(job)
    check_metadata(job, namespaced=True)


def test_rendering_the_same_job_twice_is_byte_identical() -> None:
    assert repr(render_job(IDENTITY, SPEC, GPU)) == repr(render_job(IDENTITY, SPEC, GPU))


def test_env_order_in_the_stored_spec_does_not_change_the_job() -> None:
    reordered = WorkloadSpec(
        name="train-7b",
        compute_pool="h100-pool",
        image="busybox",
        env={"B": "2", "A": "1"},
    )
    ordered = WorkloadSpec(
        name="train-7b", compute_pool="h100-pool", image="busybox", env={"A": "1", "B": "2"}
    )

    assert render_job(IDENTITY, reordered, GPU) == render_job(IDENTITY, ordered, GPU)


def test_the_metadata_only_body_declares_labels_and_finalizer_but_no_spec() -> None:
    body = render_job_metadata_only(IDENTITY, SPEC)

    validate_builtin(body)
    check_metadata(body, namespaced=True)
    assert set(body) == {"apiVersion", "kind", "metadata"}
    assert body["metadata"]["labels"] == render_job(IDENTITY, SPEC, GPU)["metadata"]["labels"]
    assert body["metadata"]["finalizers"] == ["aicp.dev/evidence"]


def test_the_schema_check_is_strict_about_unknown_job_fields() -> None:
    job = render_job(IDENTITY, SPEC, GPU)
    job["spec"]["template"]["spec"]["containers"][0]["gpu"] = 8

    with pytest.raises(kubernetes_validate.ValidationError):
        validate_builtin(job)
