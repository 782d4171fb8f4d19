"""`/_sim/stats` counts requests by verb, path pattern, content type and field manager;
`/_sim/time` moves the simulated clock."""

from __future__ import annotations

from kubernetes_asyncio import client

from kubesim import Cluster
from tests.kubesim.builders import job, raw
from tests.support.kube_fixtures import api_client_for

JOB_PATH = "/apis/batch/v1/namespaces/{namespace}/jobs/{name}"


async def test_stats_show_server_side_apply_by_its_field_manager(kube_cluster, kube_api):
    batch = client.BatchV1Api(kube_api)
    await raw("POST", f"{kube_cluster.url}/_sim/stats/reset")
    await batch.patch_namespaced_job(
        "a",
        "default",
        job("a", suspend=True),
        field_manager="aicp",
        _content_type="application/apply-patch+yaml",
    )
    await batch.patch_namespaced_job(
        "a",
        "default",
        {"metadata": {"labels": {"x": "1"}}},
        _content_type="application/merge-patch+json",
    )
    await batch.list_namespaced_job("default")
    await batch.read_namespaced_job("a", "default")
    _, stats, _ = await raw("GET", f"{kube_cluster.url}/_sim/stats")
    assert stats["total"] == 4 and stats["writes"] == 2
    assert stats["by_verb"] == {"patch": 2, "list": 1, "get": 1}
    assert stats["by_verb_path"][f"patch {JOB_PATH}"] == 2
    assert stats["by_path"]["/apis/batch/v1/namespaces/{namespace}/jobs"] == 1
    assert stats["by_content_type"] == {
        "application/apply-patch+yaml": 1,
        "application/merge-patch+json": 1,
    }
    assert stats["by_field_manager"]["aicp"] == 1
    assert "OpenAPI-Generator" in stats["by_field_manager"], "updates default to the User-Agent"
    await raw("POST", f"{kube_cluster.url}/_sim/stats/reset")
    assert (await raw("GET", f"{kube_cluster.url}/_sim/stats"))[1]["total"] == 0


async def test_advancing_simulated_time_moves_new_timestamps():
    async with Cluster(controllers=False, time_scale=0) as cluster, api_client_for(cluster) as api:
        core = client.CoreV1Api(api)
        before = await core.create_namespace({"metadata": {"name": "before"}})
        status, body, _ = await raw(
            "POST", f"{cluster.url}/_sim/time", json_body={"advance_seconds": 3600}
        )
        after = await core.create_namespace({"metadata": {"name": "after"}})
    assert status == 200 and body["now_rfc3339"].endswith("Z")
    delta = after.metadata.creation_timestamp - before.metadata.creation_timestamp
    assert 3599 <= delta.total_seconds() <= 3601
