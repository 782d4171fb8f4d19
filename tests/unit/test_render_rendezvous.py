"""A multi-node workload's Indexed Job, its headless Service and the rendezvous environment."""

from __future__ import annotations

import re
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from app.domain.render import JobIdentity, render_job
from app.domain.render.rendezvous import (
    RENDEZVOUS_ENV,
    rank_host,
    render_service,
    service_name,
)
from app.domain.specs import Quota, WorkloadSpec
from app.domain.validation import check_fits_pool, check_workload
from tests.support.kube_objects import GPU
from tests.support.kube_schemas import check_metadata, validate_builtin
from tests.support.rendering import IDENTITY, UID

BASE: dict[str, Any] = {"name": "train-7b", "compute_pool": "h100-pool", "image": "ghcr.io/a/b:1"}
SPEC = msgspec.convert(
    {**BASE, "accelerators": 8, "nodes": 2, "env": {"WANDB_MODE": "offline"}}, WorkloadSpec
)
_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def _env(job: dict[str, Any]) -> dict[str, Any]:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return {entry["name"]: entry for entry in container["env"]}


def test_a_multi_node_workload_is_an_indexed_job_that_fails_as_a_whole() -> None:
    job = render_job(IDENTITY, SPEC, GPU)

    validate_builtin(job)
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["parallelism"] == spec["completions"] == 2
    assert spec["backoffLimit"] == 0
    assert spec["podFailurePolicy"]["rules"] == [
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": "main", "operator": "NotIn", "values": [0]},
        }
    ]
    assert spec["template"]["spec"]["subdomain"] == "train-7b-3f2a1c-g1"
    (container,) = spec["template"]["spec"]["containers"]
    assert container["resources"]["requests"][GPU] == "8"


def test_every_rank_gets_the_rendezvous_environment() -> None:
    env = _env(render_job(IDENTITY, SPEC, GPU))

    master = "train-7b-3f2a1c-g1-0.train-7b-3f2a1c-g1.aicp-research.svc"
    assert env["MASTER_ADDR"]["value"] == master
    assert env["MASTER_PORT"]["value"] == "29500"
    assert env["NNODES"]["value"] == "2"
    assert env["NPROC_PER_NODE"]["value"] == "8"
    assert env["WORLD_SIZE"]["value"] == "16"
    assert env["JAX_COORDINATOR_ADDRESS"]["value"] == f"{master}:29501"
    assert env["JAX_NUM_PROCESSES"]["value"] == "2"
    assert env["AICP_NODES"]["value"] == "2"
    assert env["AICP_COORDINATOR"]["value"] == f"{master}:29500"
    index = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    for name in ("NODE_RANK", "JAX_PROCESS_ID", "AICP_NODE_RANK"):
        assert env[name] == {"name": name, "valueFrom": {"fieldRef": {"fieldPath": index}}}
    assert env["WANDB_MODE"]["value"] == "offline"
    assert set(RENDEZVOUS_ENV) <= set(env)


def test_a_single_node_workload_renders_as_before() -> None:
    spec = msgspec.convert({**BASE, "accelerators": 8}, WorkloadSpec)
    job = render_job(IDENTITY, spec, GPU)

    assert "completionMode" not in job["spec"]
    assert "podFailurePolicy" not in job["spec"]
    assert "subdomain" not in job["spec"]["template"]["spec"]
    assert set(_env(job)) == {"AICP_GENERATION", "AICP_PROJECT", "AICP_WORKLOAD"}


def test_the_headless_service_selects_the_generations_pods_and_is_owned_by_its_job() -> None:
    labels = render_job(IDENTITY, SPEC, GPU)["metadata"]["labels"]
    service = render_service(IDENTITY, labels, job_uid="job-uid-1")

    validate_builtin(service)
    check_metadata(service, namespaced=True)
    assert service["metadata"]["name"] == "train-7b-3f2a1c-g1"
    assert service["metadata"]["labels"] == labels
    assert service["metadata"]["ownerReferences"][0]["uid"] == "job-uid-1"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    pod_labels = render_job(IDENTITY, SPEC, GPU)["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


@given(
    workload=st.from_regex(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?", fullmatch=True),
    generation=st.integers(min_value=1, max_value=10**6),
    rank=st.integers(min_value=0, max_value=63),
)
def test_every_rank_has_a_valid_dns_name(workload: str, generation: int, rank: int) -> None:
    identity = JobIdentity(project="research", workload=workload, uid=UID, generation=generation)
    service = service_name(identity)
    host, subdomain, *_ = rank_host(identity, rank).split(".")

    assert _DNS_LABEL.fullmatch(service) and len(service) <= 63
    assert subdomain == service
    # The Job controller names each pod's host `<job>-<index>`: a DNS label too.
    assert host == f"{identity.job_name}-{rank}" and len(host) <= 63


def _problems(**changes: Any) -> list[tuple[str, str]]:
    return check_workload(msgspec.convert({**BASE, **changes}, WorkloadSpec))


def test_nodes_and_replicas_together_are_refused_naming_replicas() -> None:
    found = _problems(nodes=4, replicas=2)

    assert [field for field, _ in found] == ["replicas"]
    assert "must be 1 when nodes is 4" in found[0][1]


@given(key=st.sampled_from(RENDEZVOUS_ENV))
def test_a_multi_node_env_may_not_set_a_rendezvous_variable(key: str) -> None:
    fields = [field for field, _ in _problems(nodes=2, env={key: "x"})]

    assert fields == [f"env.{key}"]


def test_a_single_node_env_may_set_torch_variables_of_its_own() -> None:
    assert _problems(env={"MASTER_PORT": "1234", "WORLD_SIZE": "1"}) == []


@given(nodes=st.integers(min_value=1, max_value=64), per_node=st.integers(0, 8))
def test_the_pool_must_hold_every_rank(nodes: int, per_node: int) -> None:
    spec = msgspec.convert({**BASE, "nodes": nodes, "accelerators": per_node}, WorkloadSpec)
    quota = Quota(accelerators=16, cpu="1000", memory="10Ti")

    shortfall = check_fits_pool(spec, quota, accelerator_class="h100-80g")

    if nodes * per_node > 16:
        assert shortfall is not None
        assert shortfall.requested["accelerators"] == str(nodes * per_node)
        assert shortfall.exceeded == ["accelerators"]
    else:
        assert shortfall is None
