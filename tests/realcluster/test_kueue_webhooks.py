"""Kueue's admission webhooks on the real cluster: the configurations the launcher registers
(Kueue's own, pointed at its server on loopback), pods with a queue name gated where Kueue
manages them and left alone in `kube-system`, and what `failurePolicy: Fail` means while Kueue
is down."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from realcluster import ClusterOptions, RealCluster
from realcluster import build as building
from realcluster import cluster as launcher
from realcluster.kubeapi import ApiError
from tests.support.real_cluster import RealBackend

pytestmark = pytest.mark.real_cluster

ADMISSION = "/apis/admissionregistration.k8s.io/v1"
GATE = "kueue.x-k8s.io/admission"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"


def test_kueues_webhooks_call_its_server_on_loopback_trusting_the_cluster_ca(
    real_cluster: RealBackend,
) -> None:
    cluster = real_cluster.cluster
    api = cluster.api()
    mutating = api.get(
        f"{ADMISSION}/mutatingwebhookconfigurations/kueue-mutating-webhook-configuration"
    )
    validating = api.get(
        f"{ADMISSION}/validatingwebhookconfigurations/kueue-validating-webhook-configuration"
    )
    # Kueue's own kinds, and the frameworks it runs with: Jobs and plain pods.
    assert sorted(w["name"] for w in mutating["webhooks"]) == [
        "mclusterqueue.kb.io",
        "mjob.kb.io",
        "mpod.kb.io",
        "mresourceflavor.kb.io",
        "mworkload.kb.io",
    ]
    assert sorted(w["name"] for w in validating["webhooks"]) == [
        "vclusterqueue.kb.io",
        "vcohort.kb.io",
        "vjob.kb.io",
        "vpod.kb.io",
        "vresourceflavor.kb.io",
        "vworkload.kb.io",
    ]
    server = f"https://127.0.0.1:{cluster.ports['kueue-webhook']}/"
    ca_bundle = base64.b64encode(cluster.ca_file.read_bytes()).decode()
    skipped = {"kube-system", "kueue-system"}
    for webhook in mutating["webhooks"] + validating["webhooks"]:
        assert webhook["clientConfig"]["url"].startswith(server)
        assert webhook["clientConfig"]["caBundle"] == ca_bundle
        assert webhook["failurePolicy"] == "Fail"  # as Kueue ships it
        if webhook["name"][1:4] in ("job", "pod"):
            [requirement] = webhook["namespaceSelector"]["matchExpressions"]
            assert requirement["key"] == "kubernetes.io/metadata.name"
            assert (requirement["operator"], set(requirement["values"])) == ("NotIn", skipped)
    assert set(launcher.KUEUE_UNMANAGED_NAMESPACES) == skipped


def _queued_pod(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "queued",
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "anywhere"},
        },
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def test_a_pod_with_a_queue_name_is_gated_except_where_kueue_manages_nothing(
    real_cluster: RealBackend,
) -> None:
    api = real_cluster.cluster.api()
    created = api.request(
        "POST", "/api/v1/namespaces/default/pods?dryRun=All", _queued_pod("default")
    )
    # Kueue 0.19 gates it for topology-aware scheduling too (its feature gate is on by default).
    assert [g["name"] for g in created["spec"]["schedulingGates"]] == [GATE, TOPOLOGY_GATE]
    assert created["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert created["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]

    system = api.request(
        "POST", "/api/v1/namespaces/kube-system/pods?dryRun=All", _queued_pod("kube-system")
    )
    assert not system["spec"].get("schedulingGates")
    assert "kueue.x-k8s.io/managed" not in system["metadata"]["labels"]


def test_while_kueue_is_down_pods_are_refused_except_where_it_manages_nothing() -> None:
    """`failurePolicy: Fail`, as Kueue ships it: in a namespace Kueue manages no pod can be
    created without an answer from its webhook, with a queue name or not (which is why the
    launcher registers the webhooks only once the server is up)."""
    build = building.built()
    assert build is not None
    with RealCluster(ClusterOptions(nodes=1), build=build) as cluster:
        next(c for c in cluster.supervisor.components if c.name == "kueue").stop()
        api = cluster.api()
        plain = _queued_pod("default")
        del plain["metadata"]["labels"]
        for pod in (_queued_pod("default"), plain):
            with pytest.raises(ApiError) as refused:
                api.request("POST", "/api/v1/namespaces/default/pods?dryRun=All", pod)
            assert refused.value.status == 500
            assert "/mutate--v1-pod" in str(refused.value)
            assert "connection refused" in str(refused.value)
        api.request(
            "POST", "/api/v1/namespaces/kube-system/pods?dryRun=All", _queued_pod("kube-system")
        )
