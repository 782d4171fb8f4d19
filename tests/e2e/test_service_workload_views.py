"""`/logs` and `/manifest` of a workload, through the HTTP API of the full service on kubesim."""

from __future__ import annotations

from app.kube.apply import get
from app.kube.resources import JOBS
from tests.support.api_client import bearer
from tests.support.problems import assert_problem
from tests.support.scenario import NAMESPACE, WORKLOADS
from tests.support.service import RunningService


async def test_logs_of_a_finished_workload_are_its_pods_output(
    running_service: RunningService,
) -> None:
    await running_service.scenario().setup_pool()
    await running_service.scenario().submit("train-a")
    await running_service.scenario().wait_state("train-a", "SUCCEEDED")

    response = await running_service.client.get(f"{WORKLOADS}/train-a/logs")

    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    assert "train-a: step 1 loss 0.42" in response.text


async def test_manifest_is_the_job_aicp_applied_for_the_current_generation(
    running_service: RunningService,
) -> None:
    await running_service.scenario().setup_pool()
    workload = await running_service.scenario().submit("train-m")
    done = await running_service.scenario().wait_state("train-m", "SUCCEEDED")

    response = await running_service.client.get(f"{WORKLOADS}/train-m/manifest")

    assert response.status_code == 200, response.text
    manifest = response.json()
    job_name = done["status"]["job"]["name"]
    assert manifest["kind"] == "Job" and manifest["metadata"]["name"] == job_name
    assert manifest["metadata"]["labels"]["aicp.dev/uid"] == workload["uid"]
    assert manifest["spec"]["suspend"] is True  # created suspended; Kueue unsuspends it
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    live = await get(running_service.kube, JOBS, NAMESPACE, job_name)
    assert live is not None
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == container["image"]


async def test_logs_of_several_pods_prefix_every_line_with_its_pod(
    running_service: RunningService,
) -> None:
    await running_service.scenario().setup_pool()
    await running_service.scenario().submit("train-p", replicas=2, accelerators=4)
    await running_service.scenario().wait_state("train-p", "SUCCEEDED")

    response = await running_service.client.get(f"{WORKLOADS}/train-p/logs", params={"tail": 5})

    assert response.status_code == 200, response.text
    lines = response.text.splitlines()
    pods = {line.split("] ", 1)[0] for line in lines}
    assert len(pods) == 2, lines
    assert all(line.endswith("train-p: step 1 loss 0.42") for line in lines)


async def test_logs_of_a_workload_still_waiting_for_quota_say_there_are_no_pods_yet(
    running_service: RunningService,
) -> None:
    await running_service.scenario().setup_pool(accelerators=8)
    await running_service.scenario().submit("long", env={"KUBESIM_RUN_SECONDS": "60"})
    await running_service.scenario().wait_state("long", "RUNNING")
    await running_service.scenario().submit("waiting")
    await running_service.scenario().wait_state("waiting", "QUEUED")

    response = await running_service.client.get(f"{WORKLOADS}/waiting/logs")

    problem = assert_problem(response, 404, "not-found")
    assert "no pods for generation 1" in problem["detail"]
    assert "QUEUED" in problem["detail"]


async def test_logs_tail_outside_1_to_10000_is_a_validation_error_naming_tail(
    running_service: RunningService,
) -> None:
    await running_service.scenario().setup_pool()
    await running_service.scenario().submit("train-t")

    for tail in ("0", "10001", "many"):
        response = await running_service.client.get(
            f"{WORKLOADS}/train-t/logs", params={"tail": tail}
        )
        assert response.status_code == 422, (tail, response.text)
        assert [e["field"] for e in response.json()["errors"]] == ["tail"]


async def test_logs_and_manifest_of_an_unknown_workload_are_404(
    running_service: RunningService,
) -> None:
    await running_service.scenario().setup_pool()

    for view in ("logs", "manifest"):
        response = await running_service.client.get(f"{WORKLOADS}/nope/{view}")
        assert response.status_code == 404, response.text


async def test_a_viewer_reads_logs_and_manifest_and_a_stranger_sees_404(
    running_service: RunningService,
) -> None:
    await running_service.scenario().setup_pool()
    await running_service.scenario().submit("shared")
    await running_service.scenario().wait_state("shared", "SUCCEEDED")
    viewer = await running_service.api.create_token("research", role="viewer")
    await running_service.api.create_project("other")
    stranger = await running_service.api.create_token("other", role="admin")

    for view in ("logs", "manifest"):
        as_viewer = await running_service.client.get(
            f"{WORKLOADS}/shared/{view}", headers=bearer(viewer)
        )
        as_stranger = await running_service.client.get(
            f"{WORKLOADS}/shared/{view}", headers=bearer(stranger)
        )
        assert as_viewer.status_code == 200, as_viewer.text
        assert as_stranger.status_code == 404, as_stranger.text
