"""The API server's side of inference services: Deployments, ReplicaSets, PodDisruptionBudgets,
NetworkPolicies and HorizontalPodAutoscalers are served, defaulted and validated as the
apiserver does it, and Deployments have a working `scale` subresource (API server only)."""

from __future__ import annotations

import asyncio
import json
import shutil

import httpx
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubesim.builders import APPLY, MERGE, raw
from tests.kubesim.serving_builders import NS, deployment, hpa, network_policy, pdb, rolling

KUBECTL_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def causes_of(err: ApiException) -> list[tuple[str, str]]:
    body = json.loads(err.body)
    return [(c["field"], c["message"]) for c in body["details"]["causes"]]


async def test_a_deployment_gets_the_apiservers_defaults(kube_api):
    apps = client.AppsV1Api(kube_api)
    created = await apps.create_namespaced_deployment(NS, deployment("web", replicas=None))

    spec = created.spec
    assert spec.replicas == 1
    assert spec.strategy.type == "RollingUpdate"
    assert (
        spec.strategy.rolling_update.max_surge,
        spec.strategy.rolling_update.max_unavailable,
    ) == (
        "25%",
        "25%",
    )
    assert (spec.revision_history_limit, spec.progress_deadline_seconds) == (10, 600)
    pod_spec = spec.template.spec
    assert (pod_spec.restart_policy, pod_spec.dns_policy) == ("Always", "ClusterFirst")
    assert (pod_spec.scheduler_name, pod_spec.termination_grace_period_seconds) == (
        "default-scheduler",
        30,
    )
    assert created.metadata.generation == 1


async def test_a_recreate_deployment_gets_no_rolling_update_defaults(kube_api):
    apps = client.AppsV1Api(kube_api)
    created = await apps.create_namespaced_deployment(
        NS, deployment("web", strategy={"type": "Recreate"})
    )
    assert created.spec.strategy.type == "Recreate"
    assert created.spec.strategy.rolling_update is None


def _mismatched(body):
    body["spec"]["template"]["metadata"]["labels"] = {"app": "other"}


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        pytest.param(
            _mismatched,
            "spec.template.metadata.labels",
            'Invalid value: map[string]string{"app":"other"}: `selector` does not match '
            "template `labels`",
            id="selector-does-not-match-template",
        ),
        pytest.param(
            lambda b: b["spec"]["template"]["spec"].update(restartPolicy="Never"),
            "spec.template.spec.restartPolicy",
            'Unsupported value: "Never": supported values: "Always"',
            id="restart-policy-never",
        ),
        pytest.param(
            lambda b: b["spec"].update(replicas=-1),
            "spec.replicas",
            "Invalid value: -1: must be greater than or equal to 0",
            id="negative-replicas",
        ),
        pytest.param(
            lambda b: b["spec"].update(strategy={"type": "Recreate", "rollingUpdate": {}}),
            "spec.strategy.rollingUpdate",
            "Forbidden: may not be specified when strategy `type` is 'Recreate'",
            id="recreate-with-rolling-update",
        ),
        pytest.param(
            lambda b: b["spec"].update(strategy=rolling(0, "0%")),
            "spec.strategy.rollingUpdate.maxUnavailable",
            "Invalid value: 0: may not be 0 when `maxSurge` is 0",
            id="surge-and-unavailable-both-zero",
        ),
        pytest.param(
            lambda b: b["spec"].update(strategy=rolling("150%", 1)),
            "spec.strategy.rollingUpdate.maxSurge",
            'Invalid value: "150%": must not be greater than 100%',
            id="more-than-100-percent",
        ),
        pytest.param(
            lambda b: b["spec"].update(progressDeadlineSeconds=5, minReadySeconds=10),
            "spec.progressDeadlineSeconds",
            "Invalid value: 5: must be greater than minReadySeconds",
            id="deadline-below-min-ready",
        ),
        pytest.param(
            lambda b: b["spec"]["template"]["spec"]["containers"][0].update(
                resources={"limits": {"gpu": "1"}}
            ),
            "spec.template.spec.containers[0].resources.limits[gpu]",
            "Invalid value: 'gpu': must be a standard resource for containers",
            id="resource-name",
        ),
        pytest.param(
            lambda b: b["spec"].update(paused="yes"),
            "spec.paused",
            None,
            id="schema-type",
        ),
    ],
)
async def test_an_invalid_deployment_is_refused_in_the_apiservers_words(
    kube_api, change, field, message
):
    body = deployment("web")
    change(body)
    with pytest.raises(ApiException) as err:
        await client.AppsV1Api(kube_api).create_namespaced_deployment(NS, body)

    assert err.value.status == 422
    found = dict(causes_of(err.value))
    assert field in found
    if message is not None:
        assert found[field] == message
        assert json.loads(err.value.body)["message"] == (
            f'Deployment.apps "web" is invalid: {field}: {message}'
        )


async def test_a_deployments_selector_is_immutable(kube_api):
    apps = client.AppsV1Api(kube_api)
    await apps.create_namespaced_deployment(NS, deployment("web"))
    change = {"spec": {"selector": {"matchLabels": {"app": "web", "tier": "gpu"}}}}
    with pytest.raises(ApiException) as err:
        await apps.patch_namespaced_deployment("web", NS, change, _content_type=MERGE)
    assert err.value.status == 422
    assert causes_of(err.value) == [("spec.selector", "Invalid value: field is immutable")]


async def test_template_and_annotation_changes_bump_the_generation_but_status_does_not(kube_api):
    apps = client.AppsV1Api(kube_api)
    await apps.create_namespaced_deployment(NS, deployment("web"))
    image = {"spec": {"template": {"spec": {"containers": [{"name": "server", "image": "v:2"}]}}}}
    # A strategic merge patch, as `kubectl set image` sends: containers merge by name.
    patched = await apps.patch_namespaced_deployment("web", NS, image)
    assert patched.metadata.generation == 2
    assert patched.spec.template.spec.containers[0].image == "v:2"
    assert patched.spec.template.spec.containers[0].resources.limits == {"nvidia.com/gpu": "1"}

    noted = await apps.patch_namespaced_deployment(
        "web", NS, {"metadata": {"annotations": {"team": "a"}}}, _content_type=MERGE
    )
    assert noted.metadata.generation == 3
    status = await apps.patch_namespaced_deployment_status(
        "web", NS, {"status": {"observedGeneration": 3}}, _content_type=MERGE
    )
    assert status.metadata.generation == 3 and status.status.observed_generation == 3


async def test_a_put_without_defaults_keeps_the_deployment_unchanged(kube_api):
    apps = client.AppsV1Api(kube_api)
    created = await apps.create_namespaced_deployment(NS, deployment("web"))
    body = deployment("web")
    body["metadata"]["resourceVersion"] = created.metadata.resource_version
    replaced = await apps.replace_namespaced_deployment("web", NS, body)
    assert replaced.metadata.resource_version == created.metadata.resource_version
    assert replaced.metadata.generation == 1


async def test_the_scale_subresource_reads_and_writes_a_deployments_replicas(kube_api):
    apps = client.AppsV1Api(kube_api)
    await apps.create_namespaced_deployment(NS, deployment("web", replicas=2))

    scale = await apps.read_namespaced_deployment_scale("web", NS)
    assert (scale.kind, scale.api_version) == ("Scale", "autoscaling/v1")
    assert (scale.spec.replicas, scale.status.replicas, scale.status.selector) == (2, 0, "app=web")

    patched = await apps.patch_namespaced_deployment_scale(
        "web", NS, {"spec": {"replicas": 3}}, field_manager="tester", _content_type=MERGE
    )
    assert patched.spec.replicas == 3
    scale.spec.replicas = 5
    with pytest.raises(ApiException) as stale:
        await apps.replace_namespaced_deployment_scale("web", NS, scale)
    assert stale.value.status == 409
    scale = await apps.read_namespaced_deployment_scale("web", NS)
    scale.spec.replicas = 5
    replaced = await apps.replace_namespaced_deployment_scale("web", NS, scale)
    assert replaced.spec.replicas == 5

    after = await apps.read_namespaced_deployment("web", NS)
    assert after.spec.replicas == 5 and after.metadata.generation == 3


async def test_a_negative_scale_is_invalid(kube_api):
    apps = client.AppsV1Api(kube_api)
    await apps.create_namespaced_deployment(NS, deployment("web"))
    with pytest.raises(ApiException) as err:
        await apps.patch_namespaced_deployment_scale(
            "web", NS, {"spec": {"replicas": -1}}, _content_type=MERGE
        )
    assert err.value.status == 422
    assert json.loads(err.value.body)["message"] == (
        'Scale.autoscaling "web" is invalid: spec.replicas: Invalid value: -1: must be greater '
        "than or equal to 0"
    )


async def test_replicas_set_through_scale_belong_to_the_scaler_against_an_apply(kube_api):
    apps = client.AppsV1Api(kube_api)
    body = deployment("web", replicas=2)
    await apps.patch_namespaced_deployment(
        "web", NS, body, field_manager="aicp", _content_type=APPLY
    )
    await apps.patch_namespaced_deployment_scale(
        "web", NS, {"spec": {"replicas": 4}}, field_manager="autoscaler", _content_type=MERGE
    )

    with pytest.raises(ApiException) as err:
        await apps.patch_namespaced_deployment(
            "web", NS, body, field_manager="aicp", _content_type=APPLY
        )
    assert err.value.status == 409
    assert causes_of(err.value) == [(".spec.replicas", 'conflict with "autoscaler" using apps/v1')]
    del body["spec"]["replicas"]
    kept = await apps.patch_namespaced_deployment(
        "web", NS, body, field_manager="aicp", _content_type=APPLY
    )
    assert kept.spec.replicas == 4


async def test_server_side_apply_of_a_new_image_changes_only_the_template(kube_api):
    apps = client.AppsV1Api(kube_api)
    first = await apps.patch_namespaced_deployment(
        "web", NS, deployment("web"), field_manager="aicp", _content_type=APPLY
    )
    again = await apps.patch_namespaced_deployment(
        "web", NS, deployment("web"), field_manager="aicp", _content_type=APPLY
    )
    assert again.metadata.resource_version == first.metadata.resource_version
    changed = await apps.patch_namespaced_deployment(
        "web", NS, deployment("web", image="v:2"), field_manager="aicp", _content_type=APPLY
    )
    assert changed.spec.template.spec.containers[0].image == "v:2"
    assert changed.metadata.generation == 2


async def test_a_deployment_watch_sees_a_scale(kube_api, kube_cluster):
    apps = client.AppsV1Api(kube_api)
    created = await apps.create_namespaced_deployment(NS, deployment("web"))
    url = (
        f"{kube_cluster.url}/apis/apps/v1/namespaces/{NS}/deployments?watch=1"
        f"&resourceVersion={created.metadata.resource_version}&timeoutSeconds=1"
    )
    async with httpx.AsyncClient() as http:
        stream = asyncio.create_task(http.get(url, timeout=10))
        await asyncio.sleep(0)
        await apps.patch_namespaced_deployment_scale(
            "web", NS, {"spec": {"replicas": 7}}, _content_type=MERGE
        )
        answer = await stream
    [event] = [json.loads(line) for line in answer.text.splitlines()]
    assert event["type"] == "MODIFIED" and event["object"]["spec"]["replicas"] == 7


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kubectl_scale_and_get_work(kube_api, kube_cluster, tmp_path):
    await client.AppsV1Api(kube_api).create_namespaced_deployment(NS, deployment("web"))
    path = kube_cluster.write_kubeconfig(tmp_path / "kubeconfig")

    async def kubectl(*args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            "kubectl",
            "--kubeconfig",
            str(path),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        )
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, err.decode()
        return out.decode()

    assert (await kubectl("scale", "deploy/web", "--replicas=3")).strip() == (
        "deployment.apps/web scaled"
    )
    table = (await kubectl("get", "deploy")).splitlines()
    assert table[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert table[1].split()[:4] == ["web", "0/3", "0", "0"]


async def get_table(cluster, path: str) -> list[dict]:
    async with httpx.AsyncClient(base_url=cluster.url) as http:
        answer = await http.get(path, headers={"Accept": KUBECTL_ACCEPT})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    names = [c["name"] for c in body["columnDefinitions"]]
    return [dict(zip(names, row["cells"], strict=True)) for row in body["rows"]]


async def test_kubectl_get_prints_the_serving_kinds_columns(kube_api, kube_cluster):
    await client.AppsV1Api(kube_api).create_namespaced_deployment(NS, deployment("web"))
    await client.PolicyV1Api(kube_api).create_namespaced_pod_disruption_budget(
        NS, pdb("web", "web", maxUnavailable=1)
    )
    await client.NetworkingV1Api(kube_api).create_namespaced_network_policy(
        NS, network_policy("web", "web")
    )
    await client.AutoscalingV2Api(kube_api).create_namespaced_horizontal_pod_autoscaler(
        NS, hpa("web", "web", high=4)
    )

    [deploy] = await get_table(kube_cluster, "/apis/apps/v1/deployments")
    assert {k: deploy[k] for k in ("Name", "Ready", "Up-to-date", "Available")} == {
        "Name": "web",
        "Ready": "0/2",
        "Up-to-date": 0,
        "Available": 0,
    }
    assert (deploy["Containers"], deploy["Images"], deploy["Selector"]) == (
        "server",
        "ghcr.io/acme/vllm:1.0",
        "app=web",
    )
    [budget] = await get_table(kube_cluster, "/apis/policy/v1/poddisruptionbudgets")
    assert (budget["Min Available"], budget["Max Unavailable"], budget["Allowed Disruptions"]) == (
        "N/A",
        "1",
        0,
    )
    [policy] = await get_table(kube_cluster, "/apis/networking.k8s.io/v1/networkpolicies")
    assert policy["Pod-Selector"] == "app=web"
    [scaler] = await get_table(kube_cluster, "/apis/autoscaling/v2/horizontalpodautoscalers")
    assert {k: scaler[k] for k in ("Reference", "Targets", "MinPods", "MaxPods", "Replicas")} == {
        "Reference": "Deployment/web",
        "Targets": "cpu: <unknown>/80%",
        "MinPods": "1",
        "MaxPods": 4,
        "Replicas": 0,
    }


async def test_a_budget_takes_min_available_or_max_unavailable_not_both(kube_api):
    policy = client.PolicyV1Api(kube_api)
    created = await policy.create_namespaced_pod_disruption_budget(
        NS, pdb("web", "web", minAvailable="50%")
    )
    assert created.status.expected_pods == 0 and created.status.disruptions_allowed == 0
    with pytest.raises(ApiException) as err:
        await policy.create_namespaced_pod_disruption_budget(
            NS, pdb("both", "web", minAvailable=1, maxUnavailable=1)
        )
    assert err.value.status == 422
    assert causes_of(err.value) == [
        ("spec", "Invalid value: minAvailable and maxUnavailable cannot be both set")
    ]


async def test_an_autoscaler_gets_its_defaults_and_ordered_bounds(kube_api):
    autoscaling = client.AutoscalingV2Api(kube_api)
    body = hpa("web", "web")
    del body["spec"]["minReplicas"]
    body["spec"]["behavior"] = {"scaleDown": {"stabilizationWindowSeconds": 60}}
    created = await autoscaling.create_namespaced_horizontal_pod_autoscaler(NS, body)
    assert created.spec.min_replicas == 1
    [metric] = created.spec.metrics
    assert (metric.resource.name, metric.resource.target.average_utilization) == ("cpu", 80)
    assert created.spec.behavior.scale_up.select_policy == "Max"
    assert len(created.spec.behavior.scale_up.policies) == 2
    assert created.spec.behavior.scale_down.stabilization_window_seconds == 60
    assert created.status.desired_replicas == 0

    with pytest.raises(ApiException) as err:
        await autoscaling.create_namespaced_horizontal_pod_autoscaler(
            NS, hpa("bad", "web", low=5, high=2)
        )
    assert causes_of(err.value) == [
        ("spec.maxReplicas", "Invalid value: 2: must be greater than or equal to `minReplicas`")
    ]


async def test_a_network_policy_is_stored_strictly_and_has_no_status(kube_api, kube_cluster):
    networking = client.NetworkingV1Api(kube_api)
    created = await networking.create_namespaced_network_policy(NS, network_policy("web", "web"))
    assert created.spec.ingress[0].ports[0].port == 8000
    body = network_policy("typo", "web")
    body["spec"]["ingres"] = []
    with pytest.raises(ApiException) as err:
        await networking.create_namespaced_network_policy(NS, body)
    assert causes_of(err.value) == [("spec.ingres", 'unknown field "spec.ingres"')]
    status, _, _ = await raw(
        "GET",
        f"{kube_cluster.url}/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies/web/status",
    )
    assert status == 404
