"""An inference service's Deployment, Service, PodDisruptionBudget, NetworkPolicy and
HorizontalPodAutoscaler, checked against the real Kubernetes schemas."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.ownership import foreign_owner
from app.domain.render import (
    ServiceIdentity,
    render_deployment,
    render_horizontal_pod_autoscaler,
    render_network_policy,
    render_pod_disruption_budget,
    render_service,
    service_endpoint,
)
from app.domain.service_specs import Autoscaling, ServiceSpec
from tests.support.kube_objects import GPU
from tests.support.kube_schemas import check_metadata, validate_builtin
from tests.support.rendering import UID

IDENTITY = ServiceIdentity(
    project="research",
    service="llama-chat",
    uid=UID,
    generation=3,
    accelerator_resource=GPU,
    ingress_namespace="ingress-nginx",
)
SPEC = ServiceSpec(
    name="llama-chat",
    compute_pool="h100-pool",
    image="ghcr.io/acme/serve:2.1",
    command=["python", "-m", "serve"],
    args=["--model", "llama-3-8b"],
    env={"MODEL_DIR": "/models", "HF_HUB_OFFLINE": "1"},
    accelerators=1,
    cpu="8",
    memory="64Gi",
    replicas=2,
    port=8080,
    readiness_path="/v1/health",
    priority="high",
    labels={"team": "nlp"},
)
AUTOSCALED = msgspec.structs.replace(
    SPEC, autoscaling=Autoscaling(min_replicas=1, max_replicas=4, target_cpu_percent=60)
)
LABELS = {
    "aicp.dev/project": "research",
    "aicp.dev/service": "llama-chat",
    "aicp.dev/uid": UID,
    "app.kubernetes.io/managed-by": "aicp",
    "team": "nlp",
}
SELECTOR = {"aicp.dev/service": "llama-chat", "aicp.dev/uid": UID}


def _every_object(identity: ServiceIdentity, spec: ServiceSpec) -> list[dict[str, Any]]:
    objects = [
        render_deployment(identity, spec),
        render_service(identity, spec),
        render_pod_disruption_budget(identity, spec),
        render_network_policy(identity, spec),
    ]
    autoscaler = render_horizontal_pod_autoscaler(identity, spec)
    return objects if autoscaler is None else [*objects, autoscaler]


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


@pytest.mark.parametrize(
    "spec", [pytest.param(SPEC, id="fixed-replicas"), pytest.param(AUTOSCALED, id="autoscaled")]
)
def test_every_object_is_valid_for_kubernetes_and_named_after_the_service(
    spec: ServiceSpec,
) -> None:
    objects = _every_object(IDENTITY, spec)

    assert [obj["kind"] for obj in objects] == [
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "NetworkPolicy",
        *(["HorizontalPodAutoscaler"] if spec.autoscaling else []),
    ]
    for obj in objects:
        validate_builtin(obj)
        check_metadata(obj, namespaced=True)
        assert obj["metadata"]["name"] == "llama-chat"
        assert obj["metadata"]["namespace"] == "aicp-research"
        assert obj["metadata"]["labels"] == LABELS
        assert foreign_owner(obj, IDENTITY.owner_labels) is None


def test_the_deployment_carries_the_generation_on_its_metadata_only() -> None:
    deployment = render_deployment(IDENTITY, SPEC)

    assert deployment["metadata"]["annotations"] == {"aicp.dev/generation": "3"}
    template = deployment["spec"]["template"]
    assert "annotations" not in template["metadata"]
    assert "3" not in template["metadata"]["labels"].values()
    assert not any(entry["name"] == "AICP_GENERATION" for entry in _container(deployment)["env"])


def test_a_new_replica_count_is_a_new_generation_that_leaves_the_pod_template_alone() -> None:
    scaled = msgspec.structs.replace(SPEC, replicas=5)
    next_generation = msgspec.structs.replace(IDENTITY, generation=4)

    before = render_deployment(IDENTITY, SPEC)
    after = render_deployment(next_generation, scaled)

    assert after["spec"]["template"] == before["spec"]["template"]
    assert (before["spec"]["replicas"], after["spec"]["replicas"]) == (2, 5)
    assert after["metadata"]["annotations"] == {"aicp.dev/generation": "4"}


def test_the_deployment_declares_no_replica_count_under_autoscaling() -> None:
    assert render_deployment(IDENTITY, SPEC)["spec"]["replicas"] == 2
    assert "replicas" not in render_deployment(IDENTITY, AUTOSCALED)["spec"]


def test_a_rollout_may_take_one_replica_down_so_it_progresses_without_spare_quota() -> None:
    spec = render_deployment(IDENTITY, SPEC)["spec"]

    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1},
    }
    assert spec["progressDeadlineSeconds"] == 600
    assert spec["revisionHistoryLimit"] == 3
    assert spec["selector"] == {"matchLabels": SELECTOR}


def test_the_pods_carry_the_services_labels_and_kueues_queue_and_priority() -> None:
    template = render_deployment(IDENTITY, SPEC)["spec"]["template"]

    assert template["metadata"]["labels"] == {
        **LABELS,
        "kueue.x-k8s.io/priority-class": "aicp-high",
        "kueue.x-k8s.io/queue-name": "h100-pool",
    }
    assert list(template["metadata"]["labels"]) == sorted(template["metadata"]["labels"])


def test_the_pod_restarts_its_container_and_leaves_node_selection_to_kueue() -> None:
    pod_spec = render_deployment(IDENTITY, SPEC)["spec"]["template"]["spec"]

    assert pod_spec["restartPolicy"] == "Always"
    assert pod_spec["terminationGracePeriodSeconds"] == 30
    assert "nodeSelector" not in pod_spec and "tolerations" not in pod_spec


def test_the_main_container_serves_http_on_the_port_and_is_probed_for_readiness() -> None:
    container = _container(render_deployment(IDENTITY, SPEC))

    assert container["name"] == "main"
    assert container["image"] == "ghcr.io/acme/serve:2.1"
    assert container["command"] == ["python", "-m", "serve"]
    assert container["args"] == ["--model", "llama-3-8b"]
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert container["readinessProbe"] == {
        "httpGet": {"path": "/v1/health", "port": "http"},
        "periodSeconds": 5,
    }


def test_memory_and_accelerators_are_limited_to_the_request_and_cpu_is_not() -> None:
    resources = _container(render_deployment(IDENTITY, SPEC))["resources"]

    assert resources == {
        "requests": {"cpu": "8", "memory": "64Gi", GPU: "1"},
        "limits": {"memory": "64Gi", GPU: "1"},
    }


def test_a_cpu_only_service_requests_no_accelerator_and_has_no_command() -> None:
    spec = ServiceSpec(name="llama-chat", compute_pool="h100-pool", image="busybox")

    deployment = render_deployment(IDENTITY, spec)

    validate_builtin(deployment)
    container = _container(deployment)
    assert container["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"memory": "1Gi"},
    }
    assert "command" not in container and "args" not in container


def test_env_is_sorted_and_names_the_project_and_service() -> None:
    env = _container(render_deployment(IDENTITY, SPEC))["env"]

    assert env == [
        {"name": "AICP_PROJECT", "value": "research"},
        {"name": "AICP_SERVICE", "value": "llama-chat"},
        {"name": "HF_HUB_OFFLINE", "value": "1"},
        {"name": "MODEL_DIR", "value": "/models"},
    ]


def test_a_user_label_cannot_override_what_aicp_and_kueue_rely_on() -> None:
    sneaky = msgspec.structs.replace(
        SPEC,
        labels={
            "aicp.dev/uid": "forged",
            "aicp.dev/service": "other",
            "app.kubernetes.io/managed-by": "someone",
            "kueue.x-k8s.io/queue-name": "someone-elses-pool",
        },
    )

    deployment = render_deployment(IDENTITY, sneaky)

    labels = deployment["metadata"]["labels"]
    assert labels["aicp.dev/uid"] == UID
    assert labels["aicp.dev/service"] == "llama-chat"
    assert labels["app.kubernetes.io/managed-by"] == "aicp"
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["kueue.x-k8s.io/queue-name"] == "h100-pool"


def test_the_service_is_a_cluster_ip_on_the_named_http_port() -> None:
    spec = render_service(IDENTITY, SPEC)["spec"]

    assert spec == {
        "type": "ClusterIP",
        "selector": SELECTOR,
        "ports": [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}],
    }


def test_the_disruption_budget_lets_one_replica_go_at_a_time() -> None:
    spec = render_pod_disruption_budget(IDENTITY, SPEC)["spec"]

    assert spec == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": SELECTOR},
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }


def test_the_network_policy_admits_the_project_and_the_ingress_namespace_on_the_port() -> None:
    spec = render_network_policy(IDENTITY, SPEC)["spec"]

    assert spec == {
        "podSelector": {"matchLabels": SELECTOR},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [
                    {"podSelector": {}},
                    {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}
                        }
                    },
                ],
                "ports": [{"port": 8080, "protocol": "TCP"}],
            }
        ],
    }


def test_without_an_ingress_namespace_only_the_projects_pods_may_connect() -> None:
    identity = msgspec.structs.replace(IDENTITY, ingress_namespace=None)

    policy = render_network_policy(identity, SPEC)

    validate_builtin(policy)
    assert policy["spec"]["ingress"][0]["from"] == [{"podSelector": {}}]


def test_the_autoscaler_scales_the_deployment_on_cpu_utilisation() -> None:
    assert render_horizontal_pod_autoscaler(IDENTITY, SPEC) is None

    autoscaler = render_horizontal_pod_autoscaler(IDENTITY, AUTOSCALED)

    assert autoscaler is not None
    assert autoscaler["apiVersion"] == "autoscaling/v2"
    assert autoscaler["spec"] == {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama-chat"},
        "minReplicas": 1,
        "maxReplicas": 4,
        "metrics": [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 60},
                },
            }
        ],
    }


def test_the_endpoint_is_the_services_cluster_dns_name_and_port() -> None:
    assert service_endpoint(IDENTITY, SPEC) == "llama-chat.aicp-research.svc:8080"


def test_the_longest_service_and_project_names_still_give_valid_objects() -> None:
    identity = ServiceIdentity(
        project="p" * 30, service="s" * 40, uid=UID, generation=10**11, accelerator_resource=GPU
    )
    spec = ServiceSpec(name="s" * 40, compute_pool="q" * 30, image="busybox")

    for obj in _every_object(identity, spec):
        validate_builtin(obj)
        check_metadata(obj, namespaced=True)


def test_env_order_in_the_stored_spec_does_not_change_the_deployment() -> None:
    reordered = msgspec.structs.replace(SPEC, env={"B": "2", "A": "1"})
    ordered = msgspec.structs.replace(SPEC, env={"A": "1", "B": "2"})

    assert repr(render_deployment(IDENTITY, reordered)) == repr(
        render_deployment(IDENTITY, ordered)
    )


NAMES = st.from_regex(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", fullmatch=True)
LABEL_MAPS = st.dictionaries(
    st.from_regex(r"[a-z][a-z0-9]{0,15}", fullmatch=True),
    st.from_regex(r"[a-z0-9]{0,20}", fullmatch=True),
    max_size=4,
)
ENV = st.dictionaries(
    st.from_regex(r"[A-Z_][A-Z0-9_]{0,20}", fullmatch=True).filter(
        lambda key: not key.startswith("AICP_")
    ),
    st.text(max_size=30),
    max_size=5,
)


@st.composite
def services(draw: st.DrawFn) -> tuple[ServiceIdentity, ServiceSpec]:
    name = draw(NAMES)
    scaling = draw(
        st.none()
        | st.integers(1, 64).flatmap(
            lambda low: st.builds(
                Autoscaling,
                min_replicas=st.just(low),
                max_replicas=st.integers(low, 64),
                target_cpu_percent=st.integers(1, 100),
            )
        )
    )
    spec = ServiceSpec(
        name=name,
        compute_pool=draw(NAMES.filter(lambda pool: len(pool) <= 30)),
        image="ghcr.io/acme/serve:2.1",
        env=draw(ENV),
        accelerators=draw(st.integers(0, 8)),
        replicas=draw(st.integers(0, 64)),
        port=draw(st.integers(1, 65535)),
        autoscaling=scaling,
        priority=draw(st.sampled_from(["low", "normal", "high"])),
        labels=draw(LABEL_MAPS),
    )
    identity = ServiceIdentity(
        project=draw(NAMES.filter(lambda project: len(project) <= 30)),
        service=name,
        uid=UID,
        generation=draw(st.integers(1, 10**6)),
        accelerator_resource=GPU,
        ingress_namespace=draw(st.none() | NAMES),
    )
    return identity, spec


@settings(max_examples=30)
@given(services())
def test_rendering_is_deterministic_names_the_service_and_leaves_replicas_to_the_autoscaler(
    service: tuple[ServiceIdentity, ServiceSpec],
) -> None:
    identity, spec = service

    first, second = _every_object(identity, spec), _every_object(identity, spec)

    assert repr(first) == repr(second)
    for obj in first:
        assert obj["metadata"]["name"] == spec.name
        check_metadata(obj, namespaced=True)
    # The schemas are slow to check: the Deployment, whose shape varies most, stands for all.
    validate_builtin(first[0])
    assert ("replicas" in first[0]["spec"]) == (spec.autoscaling is None)
    assert service_endpoint(identity, spec).startswith(f"{spec.name}.")
