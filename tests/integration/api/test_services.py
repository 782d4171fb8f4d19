"""Services over HTTP: create, read, list, replace, scale, delete, as an ML engineer would.
No engine runs here: what the reconciler does is in tests/acceptance/test_services.py."""

from __future__ import annotations

from typing import Any

from tests.support.scenario import POOL, PROJECT, Scenario

SERVICES = f"/api/v1/projects/{PROJECT}/services"


def service_body(name: str = "chat", **changes: Any) -> dict[str, Any]:
    return {"name": name, "compute_pool": POOL, "image": "ghcr.io/acme/serve:2.1", **changes}


async def test_creating_a_service_answers_202_pending_with_defaults_filled(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    response = await api.client.post(SERVICES, json=service_body(accelerators=1, replicas=2))
    assert response.status_code == 202, response.text
    assert response.headers["location"] == f"{SERVICES}/chat"
    body = response.json()
    assert body["spec"] == {
        "name": "chat",
        "compute_pool": POOL,
        "image": "ghcr.io/acme/serve:2.1",
        "command": [],
        "args": [],
        "env": {},
        "accelerators": 1,
        "cpu": "1",
        "memory": "1Gi",
        "replicas": 2,
        "port": 8000,
        "readiness_path": "/healthz",
        "autoscaling": None,
        "priority": "normal",
        "labels": {},
    }
    assert body["generation"] == 1 and body["project"] == PROJECT
    status = body["status"]
    assert status["state"] == "PENDING"
    assert status["reason"] == "Accepted; waiting for the controller to apply the Deployment."
    assert status["replicas"] == {"desired": 0, "ready": 0, "updated": 0, "waiting_for_quota": 0}

    fetched = await api.client.get(f"{SERVICES}/chat")
    assert fetched.status_code == 200 and fetched.json() == body
    assert fetched.headers["etag"] == '"1"'
    listed = (await api.client.get(SERVICES)).json()
    assert [item["name"] for item in listed["items"]] == ["chat"]
    events = (await api.client.get(f"{SERVICES}/chat/events")).json()["items"]
    assert [(e["type"], e["reason"]) for e in events] == [("Accepted", "Created")]


async def test_a_second_service_of_the_same_name_is_a_conflict(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    assert (await api.client.post(SERVICES, json=service_body())).status_code == 202
    again = await api.client.post(SERVICES, json=service_body())
    assert again.status_code == 409, again.text
    assert again.json()["type"].endswith("already-exists")


async def test_bad_specs_are_422_naming_each_field(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    cases: list[tuple[dict[str, Any], str]] = [
        (service_body(name="1chat"), "name"),
        (service_body(memory="lots"), "memory"),
        (service_body(replicas=65), "replicas"),
        (service_body(port=0), "port"),
        (service_body(readiness_path="healthz"), "readiness_path"),
        (service_body(autoscaling={"min_replicas": 3, "max_replicas": 2}), "autoscaling"),
        (service_body(compute_pool="nowhere"), "compute_pool"),
        (service_body(replica=2), "replica"),
    ]
    for body, field in cases:
        response = await api.client.post(SERVICES, json=body)
        assert response.status_code == 422, (body, response.text)
        fields = [error["field"] for error in response.json().get("errors", [])]
        assert any(field in name for name in fields), (body, response.json())


async def test_one_replica_larger_than_the_pool_is_refused_more_replicas_are_not(
    api: Scenario,
) -> None:
    await api.setup_pool(accelerators=2, wait=False)
    too_big = await api.client.post(SERVICES, json=service_body(accelerators=3))
    assert too_big.status_code == 422, too_big.text
    assert too_big.json()["type"].endswith("exceeds-pool-capacity")
    assert too_big.json()["detail"].startswith("One replica of the service asks for more")
    many = await api.client.post(SERVICES, json=service_body(accelerators=1, replicas=5))
    assert many.status_code == 202, many.text


async def test_scale_replace_and_delete_are_generations_with_events(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.client.post(SERVICES, json=service_body())

    scaled = await api.client.patch(f"{SERVICES}/chat", json={"replicas": 3})
    assert scaled.status_code == 202, scaled.text
    assert scaled.json()["generation"] == 2 and scaled.json()["spec"]["replicas"] == 3
    same = await api.client.patch(f"{SERVICES}/chat", json={"replicas": 3})
    assert same.json()["generation"] == 2

    stale = await api.client.put(
        f"{SERVICES}/chat",
        json=service_body(image="ghcr.io/acme/serve:2.2"),
        headers={"If-Match": '"1"'},
    )
    assert stale.status_code == 412, stale.text
    replaced = await api.client.put(
        f"{SERVICES}/chat",
        json=service_body(image="ghcr.io/acme/serve:2.2"),
        headers={"If-Match": '"2"'},
    )
    assert replaced.status_code == 202 and replaced.json()["generation"] == 3
    assert replaced.json()["spec"]["replicas"] == 1

    deleting = await api.client.delete(f"{SERVICES}/chat")
    assert deleting.status_code == 202 and deleting.json()["status"]["state"] == "DELETING"
    refused = await api.client.patch(f"{SERVICES}/chat", json={"replicas": 1})
    assert refused.status_code == 409, refused.text

    events = (await api.client.get(f"{SERVICES}/chat/events")).json()["items"]
    assert [(e["type"], e["reason"]) for e in reversed(events)] == [
        ("Accepted", "Created"),
        ("SpecUpdated", "Scaled"),
        ("SpecUpdated", "Replaced"),
        ("DeletionRequested", "Deleted"),
    ]


async def test_a_pool_with_a_service_cannot_be_deleted(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.client.post(SERVICES, json=service_body())
    response = await api.client.delete(f"/api/v1/projects/{PROJECT}/compute-pools/{POOL}")
    assert response.status_code == 409, response.text
    assert "service/chat" in response.text


async def test_lists_filter_by_state_and_pool(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    for name in ("a-svc", "b-svc"):
        await api.client.post(SERVICES, json=service_body(name))
    await api.client.delete(f"{SERVICES}/a-svc")
    deleting = (await api.client.get(SERVICES, params={"state": "DELETING"})).json()
    assert [item["name"] for item in deleting["items"]] == ["a-svc"]
    other_pool = (await api.client.get(SERVICES, params={"compute_pool": "other"})).json()
    assert other_pool["items"] == []
    bad = await api.client.get(SERVICES, params={"state": "RUNNING"})
    assert bad.status_code == 422
    paged = (await api.client.get(SERVICES, params={"limit": 1})).json()
    assert len(paged["items"]) == 1 and paged["next_cursor"]


async def test_a_dry_run_answers_what_would_be_stored_and_writes_nothing(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    dry = await api.client.post(SERVICES, params={"dry_run": "true"}, json=service_body())
    assert dry.status_code == 200, dry.text
    assert dry.json()["dry_run"] is True and dry.json()["status_code"] == 202
    assert dry.json()["object"]["status"]["state"] == "PENDING"
    assert (await api.client.get(f"{SERVICES}/chat")).status_code == 404

    await api.client.post(SERVICES, json=service_body())
    scale = await api.client.patch(
        f"{SERVICES}/chat", params={"dry_run": "true"}, json={"replicas": 4}
    )
    assert scale.status_code == 200, scale.text
    assert {"field": "spec.replicas", "before": 1, "after": 4} in scale.json()["changes"]
    replace = await api.client.put(
        f"{SERVICES}/chat",
        params={"dry_run": "true"},
        json=service_body(image="ghcr.io/acme/serve:2.2"),
    )
    assert replace.status_code == 200, replace.text
    assert [c["field"] for c in replace.json()["changes"]] == ["spec.image"]
    stored = (await api.client.get(f"{SERVICES}/chat")).json()
    assert stored["generation"] == 1 and stored["spec"]["replicas"] == 1
    events = (await api.client.get(f"{SERVICES}/chat/events")).json()["items"]
    assert [e["type"] for e in events] == ["Accepted"]
