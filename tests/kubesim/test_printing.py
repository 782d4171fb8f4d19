"""`kubectl get` against kubesim: asked for a `meta.k8s.io` Table (kubectl's Accept header), the
list and the single object come back as one, with the apiserver's columns for Jobs and Pods,
Kueue's printer columns for Workloads and Name/Age for the rest; without it, plain JSON."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim import Cluster
from kubesim.printing import human_duration, table_version
from tests.kubesim.scenarios import KUEUE, NS, V1BETA2, Kube, gpu_job

#: What kubectl 1.3x sends for `kubectl get`.
KUBECTL_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)


@pytest.fixture
def kube_cluster_options() -> dict[str, Any]:
    return {"time_scale": 0}  # pods run only when the test advances the clock


async def get_table(cluster: Cluster, path: str, **params: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=cluster.url) as http:
        answer = await http.get(path, params=params, headers={"Accept": KUBECTL_ACCEPT})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    assert (body["kind"], body["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    return body


def shown(table: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows as `kubectl get` prints them: the always-shown columns, by name."""
    columns = table["columnDefinitions"]
    return [
        {
            c["name"]: cell
            for c, cell in zip(columns, row["cells"], strict=True)
            if c["priority"] == 0
        }
        for row in table["rows"]
    ]


async def test_jobs_pods_and_workloads_print_the_usual_columns(
    kube: Kube, kube_cluster_with_controllers: Cluster
) -> None:
    cluster = kube_cluster_with_controllers
    await kube.kueue_setup()
    await kube.batch.create_namespaced_job(NS, gpu_job("train-1", run_seconds=30))
    await kube.wait_pod_phase("train-1", "Running")

    jobs = await get_table(cluster, "/apis/batch/v1/jobs")
    assert [c["name"] for c in jobs["columnDefinitions"] if c["priority"] == 0] == [
        "Name", "Status", "Completions", "Duration", "Age",
    ]  # fmt: skip
    [job] = shown(jobs)
    assert (job["Name"], job["Status"], job["Completions"]) == ("train-1", "Running", "0/1")
    assert job["Duration"].endswith("s") and job["Age"].endswith("s")
    assert jobs["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert jobs["rows"][0]["object"]["metadata"]["namespace"] == NS  # kubectl get -A reads it

    [pod] = shown(await get_table(cluster, f"/api/v1/namespaces/{NS}/pods"))
    assert list(pod) == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert pod["Name"].startswith("train-1-") and (pod["Ready"], pod["Status"]) == (
        "1/1",
        "Running",
    )
    assert pod["Restarts"] == 0

    [workload] = shown(await get_table(cluster, f"/apis/{KUEUE}/{V1BETA2}/workloads"))
    assert list(workload) == ["Name", "Queue", "Reserved in", "Admitted", "Finished", "Age"]
    assert workload["Name"].startswith("job-train-1-")
    assert (workload["Queue"], workload["Reserved in"]) == ("team-a", "gpu-cq")
    assert (workload["Admitted"], workload["Finished"]) == ("True", "")

    one = await get_table(cluster, f"/apis/batch/v1/namespaces/{NS}/jobs/train-1")
    assert shown(one)[0]["Name"] == "train-1"
    [flavor] = shown(await get_table(cluster, f"/apis/{KUEUE}/{V1BETA2}/resourceflavors"))
    assert list(flavor) == ["Name", "Age"]

    whole = await get_table(cluster, "/apis/batch/v1/jobs", includeObject="Object")
    assert whole["rows"][0]["object"]["spec"]["template"]["spec"]["containers"]
    async with httpx.AsyncClient(base_url=cluster.url) as http:
        plain = (await http.get("/apis/batch/v1/jobs")).json()
    assert plain["kind"] == "JobList"  # what every client but kubectl gets


async def test_a_finished_job_is_complete_with_its_duration(
    kube: Kube, kube_cluster_with_controllers: Cluster
) -> None:
    await kube.kueue_setup()
    await kube.batch.create_namespaced_job(NS, gpu_job("short", run_seconds=130))
    await kube.wait_pod_phase("short", "Running")
    kube_cluster_with_controllers.clock.advance(130)
    await kube.wait_condition("short", "Complete")
    [job] = shown(await get_table(kube_cluster_with_controllers, "/apis/batch/v1/jobs"))
    assert (job["Status"], job["Completions"], job["Duration"]) == ("Complete", "1/1", "2m10s")


@pytest.mark.parametrize(
    ("accept", "version"),
    [
        (KUBECTL_ACCEPT, "v1"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", "v1beta1"),
        ("application/json", None),
        ("application/json;as=Table;v=v2;g=meta.k8s.io,application/json", None),
        (None, None),
    ],
)
def test_only_a_meta_k8s_io_table_accept_asks_for_a_table(
    accept: str | None, version: str | None
) -> None:
    assert table_version(accept) == version


@pytest.mark.parametrize(
    ("seconds", "shown_as"),
    [(0, "0s"), (119, "119s"), (130, "2m10s"), (600, "10m"), (3 * 3600 + 300, "3h5m"),
     (30 * 3600, "30h"), (50 * 3600, "2d2h"), (400 * 86400, "400d"), (3 * 365 * 86400, "3y")],
)  # fmt: skip
def test_ages_and_durations_read_as_kubectl_prints_them(seconds: int, shown_as: str) -> None:
    assert human_duration(seconds) == shown_as


@given(st.integers(min_value=0, max_value=20 * 365 * 86400))
def test_every_duration_is_short_and_made_of_units(seconds: int) -> None:
    text = human_duration(seconds)
    assert len(text) <= 7 and text[-1] in "smhdy" and text[0].isdigit()
