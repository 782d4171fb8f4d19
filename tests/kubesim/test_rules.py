"""kubesim refuses what a real apiserver refuses beyond the schemas: bad label syntax, container
resource names that are not resources, and ResourceFlavors breaking the CRD's CEL rules."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubesim.builders import KUEUE, V1BETA2, job, resource_flavor


def flavor_with(**spec: Any) -> dict[str, Any]:
    body = resource_flavor("f")
    body["spec"] = spec
    return body


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"tolerations": [{"operator": "Equal", "value": "x"}]}, id="no-key"),
        pytest.param({"tolerations": [{"key": "k", "operator": "Exists", "value": ""}]},
                     id="exists-value"),
        pytest.param({"tolerations": [{"key": "k", "operator": "Lt"}]}, id="operator"),
        pytest.param({"tolerations": [{"key": "k", "effect": "Sometimes"}]}, id="effect"),
        pytest.param({"tolerations": [{"key": "k", "tolerationSeconds": 5}]}, id="seconds"),
        pytest.param({"nodeLabels": {"bad key": "v"}}, id="label-key"),
        pytest.param({"nodeLabels": {"k": "bad value!"}}, id="label-value"),
        pytest.param({"nodeLabels": {f"k{i}": "v" for i in range(9)}}, id="nine-labels"),
        pytest.param({"nodeTaints": [{"key": "k", "effect": "Never"}]}, id="taint-effect"),
    ],
)  # fmt: skip
async def test_a_resource_flavor_breaking_the_crd_rules_is_invalid(kube_api, spec) -> None:
    custom = client.CustomObjectsApi(kube_api)
    with pytest.raises(ApiException) as err:
        await custom.create_cluster_custom_object(
            KUEUE, V1BETA2, "resourceflavors", flavor_with(**spec)
        )
    assert err.value.status == 422, err.value.body


@pytest.mark.parametrize("resource", ["pods", "nvidia gpu", "gpu", "kubernetes.io/gpu", "a/b/c"])
async def test_a_container_requesting_a_non_resource_is_invalid(kube_api, resource: str) -> None:
    body = job("j")
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {resource: "1"}}
    with pytest.raises(ApiException) as err:
        await client.BatchV1Api(kube_api).create_namespaced_job("default", body)
    assert err.value.status == 422, err.value.body


async def test_valid_flavors_and_extended_resources_are_accepted(kube_api) -> None:
    custom = client.CustomObjectsApi(kube_api)
    tolerations = [
        {"operator": "Exists"},
        {"key": "k", "value": "v", "effect": "NoExecute", "tolerationSeconds": 5},
    ]
    spec = {"nodeLabels": {"kubernetes.io/arch": "amd64"}, "tolerations": tolerations}
    await custom.create_cluster_custom_object(
        KUEUE, V1BETA2, "resourceflavors", flavor_with(**spec)
    )
    body = job("ok")
    limits = {"nvidia.com/gpu": "1", "cpu": "1", "hugepages-2Mi": "2Mi"}
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": limits}
    await client.BatchV1Api(kube_api).create_namespaced_job("default", body)
