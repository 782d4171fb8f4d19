"""core/v1 Services: headless ones as a multi-node Job needs them, created, read, listed,
watched, applied, patched and deleted through kubernetes_asyncio, with the apiserver's defaults
and 422s; kubectl lists them."""

from __future__ import annotations

import asyncio
import json
import shutil
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim import Cluster

APPLY = "application/apply-patch+yaml"
STRATEGIC = "application/strategic-merge-patch+json"
NS = "default"


def headless(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NS, "labels": {"app.kubernetes.io/name": name}},
        "spec": {
            "clusterIP": "None",
            "selector": {"batch.kubernetes.io/job-name": name},
            "ports": [{"name": "rendezvous", "port": 29500}],
            "publishNotReadyAddresses": True,
            **spec,
        },
    }


async def test_a_headless_service_is_created_with_the_apiservers_defaults(kube_api) -> None:
    core = client.CoreV1Api(kube_api)
    created = await core.create_namespaced_service(NS, headless("train"))

    spec = created.spec
    assert (spec.cluster_ip, spec.cluster_ips, spec.type) == ("None", ["None"], "ClusterIP")
    assert spec.publish_not_ready_addresses is True
    assert spec.selector == {"batch.kubernetes.io/job-name": "train"}
    [port] = spec.ports
    assert (port.name, port.port, port.protocol, port.target_port) == (
        "rendezvous",
        29500,
        "TCP",
        29500,
    )
    assert (spec.session_affinity, spec.ip_families) == ("None", ["IPv4"])
    read = await core.read_namespaced_service("train", NS)
    assert read.metadata.uid == created.metadata.uid
    assert read.metadata.labels == {"app.kubernetes.io/name": "train"}


async def test_a_service_with_a_cluster_ip_keeps_the_one_allocated_to_it(kube_api) -> None:
    core = client.CoreV1Api(kube_api)
    body = headless("api")
    del body["spec"]["clusterIP"]
    created = await core.create_namespaced_service(NS, body)
    ip = created.spec.cluster_ip
    assert ip.startswith("10.96.") and created.spec.cluster_ips == [ip]

    # A PUT without the address keeps it; changing it is refused.
    body["metadata"]["labels"]["tier"] = "x"
    replaced = await core.replace_namespaced_service("api", NS, body)
    assert replaced.spec.cluster_ip == ip and replaced.metadata.labels["tier"] == "x"
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_service(
            "api", NS, {"spec": {"clusterIP": "10.96.0.9"}}, _content_type=STRATEGIC
        )
    assert err.value.status == 422
    assert (
        "spec.clusterIP: Invalid value: field is immutable" in json.loads(err.value.body)["message"]
    )


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"clusterIP": "", "ports": []}, "spec.ports", "Required value"),
        (
            {"ports": [{"name": "a", "port": 0}]},
            "spec.ports[0].port",
            "Invalid value: 0: must be between 1 and 65535, inclusive",
        ),
        (
            {"ports": [{"port": 1}, {"name": "b", "port": 2}]},
            "spec.ports[0].name",
            "Required value",
        ),
        (
            {"ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]},
            "spec.ports[1].name",
            'Duplicate value: "a"',
        ),
        ({"type": "Magic"}, "spec.type", 'Unsupported value: "Magic"'),
        ({"clusterIP": "nope"}, "spec.clusterIPs[0]", 'Invalid value: "nope"'),
        ({"selector": {"a": "b c"}}, "spec.selector[a]", "Invalid value: 'b c'"),
    ],
)
async def test_an_invalid_service_is_a_422_naming_the_field(
    kube_api, spec: dict[str, Any], field: str, message: str
) -> None:
    body = headless("bad", **spec)
    with pytest.raises(ApiException) as err:
        await client.CoreV1Api(kube_api).create_namespaced_service(NS, body)
    status = json.loads(err.value.body)
    assert err.value.status == 422 and status["reason"] == "Invalid"
    causes = {c["field"]: c["message"] for c in status["details"]["causes"]}
    assert field in causes and causes[field].startswith(message), causes


async def test_a_port_without_its_number_is_a_schema_422(kube_api) -> None:
    with pytest.raises(ApiException) as err:
        await client.CoreV1Api(kube_api).create_namespaced_service(
            NS, headless("bad", ports=[{"name": "x"}])
        )
    causes = json.loads(err.value.body)["details"]["causes"]
    required = {"reason": "FieldValueRequired", "message": "Required value"}
    assert {**required, "field": "spec.ports[0].port"} in causes


async def test_services_are_applied_listed_watched_and_deleted(kube_api) -> None:
    core = client.CoreV1Api(kube_api)
    events: list[tuple[str, str]] = []
    listed = await core.list_namespaced_service(NS)
    assert listed.items == []

    async def watch_services() -> None:
        async with watch.Watch() as w:
            stream = w.stream(
                core.list_namespaced_service,
                NS,
                resource_version=listed.metadata.resource_version,
                timeout_seconds=5,
            )
            async for event in stream:
                events.append((event["type"], event["object"].metadata.name))
                if event["type"] == "DELETED":
                    return

    watcher = asyncio.create_task(watch_services())
    body = headless("train")
    await core.patch_namespaced_service(
        "train", NS, body, field_manager="aicp", _content_type=APPLY
    )
    body["spec"]["ports"].append({"name": "coordinator", "port": 1234})
    body["metadata"]["finalizers"] = ["aicp.dev/cleanup"]
    applied = await core.patch_namespaced_service(
        "train", NS, body, field_manager="aicp", _content_type=APPLY
    )
    assert [p.port for p in applied.spec.ports] == [29500, 1234]
    assert applied.spec.cluster_ip == "None"
    assert [s.metadata.name for s in (await core.list_namespaced_service(NS)).items] == ["train"]

    await core.delete_namespaced_service("train", NS)  # held by its finalizer
    assert (await core.read_namespaced_service("train", NS)).metadata.deletion_timestamp
    await core.patch_namespaced_service(
        "train",
        NS,
        {"metadata": {"finalizers": None}},
        _content_type="application/merge-patch+json",
    )
    await asyncio.wait_for(watcher, 5)
    # created, re-applied, marked deleting, removed by the write that emptied the finalizers
    assert events == [("ADDED", "train"), ("MODIFIED", "train"), ("MODIFIED", "train"),
                      ("DELETED", "train")]  # fmt: skip
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_service("train", NS)
    assert err.value.status == 404
    assert json.loads(err.value.body)["message"] == 'services "train" not found'


async def test_a_service_owned_by_a_job_goes_with_it(kube_api) -> None:
    core, batch = client.CoreV1Api(kube_api), client.BatchV1Api(kube_api)
    job = await batch.create_namespaced_job(
        NS,
        {
            "metadata": {"name": "train"},
            "spec": {
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "x"}]}
                }
            },
        },
    )
    body = headless("train")
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": job.metadata.uid}
    ]
    await core.create_namespaced_service(NS, body)
    await batch.delete_namespaced_job("train", NS, propagation_policy="Background")
    assert (await core.list_namespaced_service(NS)).items == []


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kubectl_gets_services(kube_cluster: Cluster, kube_api, tmp_path) -> None:
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_service(NS, headless("train"))
    config = kube_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(config), "get", "svc", "-o", "wide",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    header, row = out.decode().splitlines()
    assert header.split() == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE",
                              "SELECTOR"]  # fmt: skip
    assert row.split()[:5] == ["train", "ClusterIP", "None", "<none>", "29500/TCP"]
    assert row.split()[-1] == "batch.kubernetes.io/job-name=train"
