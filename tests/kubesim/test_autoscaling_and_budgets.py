"""The autoscaler hook (`POST /_sim/autoscale`) scales a Deployment as the
HorizontalPodAutoscaler controller would, owning `.spec.replicas` as `kube-controller-manager`;
a PodDisruptionBudget's status counts the pods its selector picks."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubesim.builders import APPLY, raw
from tests.kubesim.scenarios import Kube
from tests.kubesim.serving_builders import NS, deployment, hpa, pdb
from tests.kubesim.serving_probes import Serving
from tests.support.waiting import wait_until


@pytest.fixture
def kube_cluster_options() -> dict[str, Any]:
    return {"time_scale": 0}


@pytest.fixture
def serving(kube: Kube) -> Serving:
    return Serving(kube.api)


async def autoscale(cluster: Any, name: str, replicas: Any) -> tuple[int, Any]:
    body = {"namespace": NS, "name": name, "replicas": replicas}
    status, answer, _ = await raw("POST", f"{cluster.url}/_sim/autoscale", json_body=body)
    return status, answer


async def test_the_autoscale_hook_scales_the_target_and_records_the_autoscaler(
    serving, kube: Kube, kube_cluster_with_controllers
):
    cluster = kube_cluster_with_controllers
    body = deployment("web", replicas=2)
    await serving.apps.patch_namespaced_deployment(
        "web", NS, body, field_manager="aicp", _content_type=APPLY
    )
    autoscaling = client.AutoscalingV2Api(kube.api)
    await autoscaling.create_namespaced_horizontal_pod_autoscaler(NS, hpa("web", "web", high=4))
    await serving.wait_ready("web", 2)

    status, answer = await autoscale(cluster, "web", 3)

    assert status == 200, answer
    assert answer["scale"]["spec"]["replicas"] == 3
    await serving.wait_ready("web", 3)
    scaler = await autoscaling.read_namespaced_horizontal_pod_autoscaler("web", NS)
    assert (scaler.status.current_replicas, scaler.status.desired_replicas) == (2, 3)
    assert scaler.status.last_scale_time is not None
    reasons = {c.type: (c.status, c.reason) for c in scaler.status.conditions}
    assert reasons == {
        "AbleToScale": ("True", "SucceededRescale"),
        "ScalingActive": ("True", "ValidMetricFound"),
        "ScalingLimited": ("False", "DesiredWithinRange"),
    }
    # The autoscaler now owns .spec.replicas: an apply that still declares 2 conflicts.
    with pytest.raises(ApiException) as err:
        await serving.apps.patch_namespaced_deployment(
            "web", NS, body, field_manager="aicp", _content_type=APPLY
        )
    causes = json.loads(err.value.body)["details"]["causes"]
    assert err.value.status == 409
    assert causes == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "kube-controller-manager" using apps/v1',
            "field": ".spec.replicas",
        }
    ]


async def test_the_autoscale_hook_holds_the_size_within_the_autoscalers_bounds(
    serving, kube: Kube, kube_cluster_with_controllers
):
    await serving.apps.create_namespaced_deployment(NS, deployment("web", replicas=1, gpus=0))
    autoscaling = client.AutoscalingV2Api(kube.api)
    await autoscaling.create_namespaced_horizontal_pod_autoscaler(
        NS, hpa("web", "web", low=1, high=3)
    )

    status, answer = await autoscale(kube_cluster_with_controllers, "web", 10)

    assert status == 200
    assert answer["status"]["desiredReplicas"] == 3
    limited = next(c for c in answer["status"]["conditions"] if c["type"] == "ScalingLimited")
    assert (limited["status"], limited["reason"]) == ("True", "TooManyReplicas")
    await serving.wait_ready("web", 3)


@pytest.mark.parametrize(
    ("name", "replicas", "code"),
    [
        pytest.param("ghost", 2, 404, id="no-such-autoscaler"),
        pytest.param("web", -1, 400, id="negative"),
        pytest.param("web", "two", 400, id="not-a-number"),
    ],
)
async def test_the_autoscale_hook_refuses_what_it_cannot_do(
    kube: Kube, kube_cluster_with_controllers, name, replicas, code
):
    autoscaling = client.AutoscalingV2Api(kube.api)
    await autoscaling.create_namespaced_horizontal_pod_autoscaler(NS, hpa("web", "web"))
    status, answer = await autoscale(kube_cluster_with_controllers, name, replicas)
    assert status == code and answer["kind"] == "Status"


async def test_a_budget_counts_the_healthy_pods_of_its_deployment(serving, kube: Kube):
    policy = client.PolicyV1Api(kube.api)
    await policy.create_namespaced_pod_disruption_budget(NS, pdb("web", "web", maxUnavailable=1))
    await serving.apps.create_namespaced_deployment(NS, deployment("web", replicas=3, gpus=0))
    await serving.wait_ready("web", 3)

    async def counted() -> Any:
        budget = await policy.read_namespaced_pod_disruption_budget("web", NS)
        return budget if budget.status.current_healthy == 3 else None

    budget = await wait_until(counted, message="the budget's status")
    status = budget.status
    assert (status.expected_pods, status.desired_healthy, status.disruptions_allowed) == (3, 2, 1)
    assert status.observed_generation == 1
    [allowed] = status.conditions
    assert (allowed.type, allowed.status, allowed.reason) == (
        "DisruptionAllowed",
        "True",
        "SufficientPods",
    )

    await policy.create_namespaced_pod_disruption_budget(NS, pdb("strict", "web", minAvailable=3))

    async def strict() -> Any:
        budget = await policy.read_namespaced_pod_disruption_budget("strict", NS)
        return budget if budget.status.observed_generation == 1 else None

    budget = await wait_until(strict, message="the strict budget's status")
    status = budget.status
    assert (status.expected_pods, status.desired_healthy, status.current_healthy) == (3, 3, 3)
    assert status.disruptions_allowed == 0
    assert (status.conditions[0].status, status.conditions[0].reason) == (
        "False",
        "InsufficientPods",
    )
