"""The real cluster itself: the versions built, the control plane's readiness, the fake GPU
nodes, Kueue's API, kubectl, least privilege for aicp, and a clean stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from realcluster import RealCluster
from realcluster import build as building
from realcluster.kubeapi import ApiError
from tests.support.real_cluster import RealBackend

pytestmark = pytest.mark.real_cluster


def _version(binary: Path, *args: str) -> str:
    return subprocess.run([binary, *args], capture_output=True, text=True, check=True).stdout


def test_the_binaries_report_the_pinned_versions(real_cluster: RealBackend) -> None:
    build = real_cluster.cluster.build
    assert _version(build.binary("kube-apiserver"), "--version").strip() == (
        f"Kubernetes {building.KUBERNETES_VERSION}"
    )
    assert "etcd Version: 3.7.0" in _version(build.binary("etcd"), "--version")
    client = json.loads(_version(build.binary("kubectl"), "version", "--client", "-o", "json"))
    assert client["clientVersion"]["gitVersion"] == building.KUBERNETES_VERSION


def test_the_gpu_nodes_carry_the_fake_gpu_operator_labels_and_capacity(
    real_cluster: RealBackend,
) -> None:
    nodes = real_cluster.cluster.api().get("/api/v1/nodes")["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == ["gpu-node-0", "gpu-node-1"]
    for node in nodes:
        labels = node["metadata"]["labels"]
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert labels["nvidia.com/gpu.memory"] == "81920"
        assert labels["nvidia.com/gpu.count"] == "8"
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready[0]["status"] == "True"
        assert not node["spec"].get("taints")


def test_kueue_serves_v1beta2_as_its_storage_version(real_cluster: RealBackend) -> None:
    crd = real_cluster.cluster.api().get(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/workloads.kueue.x-k8s.io"
    )
    storage = [v["name"] for v in crd["spec"]["versions"] if v["storage"]]
    assert storage == ["v1beta2"]


def test_kubectl_works_against_the_cluster(real_cluster: RealBackend, tmp_path: Path) -> None:
    kubeconfig = real_cluster.cluster.write_kubeconfig(tmp_path / "kubeconfig")
    kubectl = real_cluster.cluster.build.binary("kubectl")
    out = subprocess.run(
        [kubectl, "get", "nodes", "-o", "name"],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == ["node/gpu-node-0", "node/gpu-node-1"]


def test_aicps_token_holds_exactly_the_charts_cluster_role(real_cluster: RealBackend) -> None:
    aicp = real_cluster.cluster.api("aicp")
    aicp.get("/apis/batch/v1/jobs")  # granted: list jobs
    aicp.get("/apis/kueue.x-k8s.io/v1beta2/clusterqueues")
    aicp.get("/apis/apps/v1/deployments")  # an inference service's
    for forbidden in ("/api/v1/secrets", "/api/v1/configmaps", "/apis/apps/v1/statefulsets"):
        with pytest.raises(ApiError) as refused:
            aicp.get(forbidden)
        assert refused.value.status == 403, forbidden


def test_a_stopped_cluster_leaves_no_process_behind() -> None:
    build = building.built()
    assert build is not None
    cluster = RealCluster(build=build)
    cluster.start()
    pids = [component.process.pid for component in cluster.supervisor.components]
    assert len(pids) == 6
    cluster.stop()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid), f"process {pid} still runs"


def _zombie(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    return "State:\tZ" in status


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def test_a_launcher_killed_with_sigkill_takes_its_components_with_it(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    with subprocess.Popen(
        [sys.executable, "-m", "realcluster", "up", "--dir", str(tmp_path / "cluster")],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as launcher:
        try:
            assert launcher.stderr is not None
            for line in launcher.stderr:  # ends at EOF should it exit early
                if "real-cluster: up in" in line:
                    break
            assert launcher.poll() is None, "the launcher exited before the cluster was up"
            components = _children(launcher.pid)
            assert len(components) == 6
            launcher.send_signal(signal.SIGKILL)  # no teardown code runs
            launcher.wait()
            deadline = time.monotonic() + 15
            while [p for p in components if Path(f"/proc/{p}").exists() and not _zombie(p)]:
                assert time.monotonic() < deadline, "components outlived their launcher"
                time.sleep(0.05)
        finally:
            if launcher.poll() is None:
                launcher.kill()


def test_kubectl_reads_kueues_visibility_api_through_aggregation(
    real_cluster: RealBackend, tmp_path: Path
) -> None:
    cluster = real_cluster.cluster
    api = cluster.api()
    for version in ("v1beta2", "v1beta1"):
        service = api.get(
            f"/apis/apiregistration.k8s.io/v1/apiservices/{version}.visibility.kueue.x-k8s.io"
        )
        assert service["spec"]["caBundle"] and not service["spec"].get("insecureSkipTLSVerify")
        assert {c["type"]: c["status"] for c in service["status"]["conditions"]} == {
            "Available": "True"
        }
    slices = api.get("/apis/discovery.k8s.io/v1/namespaces/kueue-system/endpointslices")
    [endpoint] = [e for s in slices["items"] for e in s["endpoints"]]
    assert not endpoint["addresses"][0].startswith("127.")  # an Endpoint may not be loopback

    kueue = "/apis/kueue.x-k8s.io/v1beta2"
    api.request("POST", "/api/v1/namespaces", _namespace("visibility-probe"))
    api.request("POST", f"{kueue}/resourceflavors", _kueue("ResourceFlavor", "visibility-probe"))
    queue = _kueue("ClusterQueue", "visibility-probe")
    queue["spec"] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {"name": "visibility-probe", "resources": [{"name": "cpu", "nominalQuota": 1}]}
                ],
            }
        ],
    }
    api.request("POST", f"{kueue}/clusterqueues", queue)
    local = _kueue("LocalQueue", "probe")
    local["spec"] = {"clusterQueue": "visibility-probe"}
    api.request("POST", f"{kueue}/namespaces/visibility-probe/localqueues", local)
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    group = "/apis/visibility.kueue.x-k8s.io/v1beta2"
    try:
        for path in (
            f"{group}/clusterqueues/visibility-probe/pendingworkloads",
            f"{group}/namespaces/visibility-probe/localqueues/probe/pendingworkloads?limit=5",
        ):
            deadline = time.monotonic() + 30  # until Kueue's cache has the new queues
            while True:
                done = subprocess.run(
                    [cluster.build.binary("kubectl"), "get", "--raw", path],
                    env={**os.environ, "KUBECONFIG": str(kubeconfig)},
                    capture_output=True,
                    text=True,
                )
                if done.returncode == 0 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert done.returncode == 0, done.stderr
            answer = json.loads(done.stdout)
            assert (answer["kind"], answer["items"]) == ("PendingWorkloadsSummary", [])
    finally:
        api.request("DELETE", f"{kueue}/clusterqueues/visibility-probe")
        api.request("DELETE", f"{kueue}/resourceflavors/visibility-probe")
        api.request("DELETE", "/api/v1/namespaces/visibility-probe")


def _namespace(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _kueue(kind: str, name: str) -> dict[str, object]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": {"name": name}}
