"""Discovery, kubectl, and the `python -m kubesim` entry point."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config

from kubesim.command import LISTENING, command
from tests.kubesim.builders import job, raw


async def test_discovery_lists_every_served_resource(kube_cluster):
    _, groups, _ = await raw("GET", f"{kube_cluster.url}/apis")
    _, core, _ = await raw("GET", f"{kube_cluster.url}/api/v1")
    _, kueue, _ = await raw("GET", f"{kube_cluster.url}/apis/kueue.x-k8s.io/v1beta2")
    _, version, _ = await raw("GET", f"{kube_cluster.url}/version")
    assert {g["name"] for g in groups["groups"]} == {
        "apps",
        "autoscaling",
        "batch",
        "kueue.x-k8s.io",
        "networking.k8s.io",
        "policy",
        "visibility.kueue.x-k8s.io",
    }
    assert {"namespaces", "nodes", "pods", "pods/status", "pods/log", "events"} <= {
        r["name"] for r in core["resources"]
    }
    by_name = {r["name"]: r for r in kueue["resources"]}
    assert by_name["clusterqueues"]["namespaced"] is False
    assert "workloads/status" in by_name and "resourceflavors/status" not in by_name
    assert version["major"] == "1"


async def test_the_version_api_of_the_client_works(kube_api):
    info = await client.VersionApi(kube_api).get_code()
    assert info.git_version.startswith("v1.")


async def test_a_kubeconfig_from_the_cluster_configures_the_client(kube_cluster, tmp_path):
    path = kube_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    api = await config.new_client_from_config(config_file=str(path))
    async with api:
        namespaces = await client.CoreV1Api(api).list_namespace()
    assert "default" in [n.metadata.name for n in namespaces.items]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kubectl_lists_jobs_across_namespaces(kube_cluster, kube_api, tmp_path):
    await client.BatchV1Api(kube_api).create_namespaced_job("default", job("train-1"))
    path = kube_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        str(path),
        "get",
        "jobs",
        "-A",
        "-o",
        "json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    assert [j["metadata"]["name"] for j in json.loads(out)["items"]] == ["train-1"]


async def test_the_command_line_serves_writes_a_kubeconfig_and_stops_on_sigterm(tmp_path):
    kubeconfig = tmp_path / "kc.yaml"
    proc = await asyncio.create_subprocess_exec(
        *command(kubeconfig, "--no-controllers"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
        url = line.strip().rsplit(" ", 1)[-1]
        assert line.startswith(f"{LISTENING}http://127.0.0.1:")
        assert url in kubeconfig.read_text()
        status, body, _ = await raw("GET", f"{url}/api/v1/namespaces/default")
        assert status == 200 and body["metadata"]["name"] == "default"
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 20)
    assert code == 0
