"""`aicp` and inference services against a running aicp on kubesim: `apply -f` with
`kind: Service` among other kinds, `get` (and its live watch, `-w`), `scale`, `describe` and
`delete`.

The CLI runs as a subprocess (the installed console script), as in tests/e2e/test_cli.py. The
first test asserts only what the API guarantees right after each call; the second one what
the reconciler makes of the service.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli import admin_cli, open_streams
from tests.support.scenario import POOL, PROJECT
from tests.support.service import RunningService
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(180)

SERVICES = f"/api/v1/projects/{PROJECT}/services"
SERVICE = (
    "kind: Service\nname: chat\ncompute_pool: h100-pool\nimage: ghcr.io/acme/serve:2.1\n"
    "accelerators: 1\n"
)
WORKLOAD = (
    "name: train\ncompute_pool: h100-pool\nimage: busybox\nenv: {KUBESIM_RUN_SECONDS: '60'}\n"
)
POOL_DOC = (
    "kind: ComputePool\nname: h100-pool\naccelerator_class: h100-80g\n"
    "quota: {accelerators: 16, cpu: '256', memory: 2Ti}\n"
)


async def stored(running: RunningService, name: str) -> dict[str, Any] | None:
    """The service as the API answers it; None once it answers 404."""
    response = await running.client.get(f"{SERVICES}/{name}")
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def test_a_service_is_applied_among_other_kinds_listed_scaled_described_and_deleted(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    cli = admin_cli(running_service, tmp_path)
    (tmp_path / "all.yaml").write_text("---\n".join([POOL_DOC, WORKLOAD, SERVICE]))

    applied = await cli.run("apply", "-f", "all.yaml")
    again = await cli.run("apply", "-f", "all.yaml")

    assert (applied.code, applied.out.splitlines()) == (
        0,
        ["computepool/h100-pool unchanged", "workload/train created", "service/chat created"],
    ), applied.err
    assert again.out.splitlines() == [
        "computepool/h100-pool unchanged",
        "workload/train unchanged",
        "service/chat unchanged",
    ], again.err
    created = await stored(running_service, "chat")
    assert created is not None and created["generation"] == 1
    assert created["spec"]["port"] == 8000 and created["spec"]["accelerators"] == 1

    # get: the table, one by name in json, and the filters.
    listed = await cli.run("get", "services")
    header, row = listed.out.splitlines()
    assert header.split() == [
        "NAME", "STATE", "POOL", "READY", "GPUS", "ENDPOINT", "AGE", "REASON"
    ]  # fmt: skip
    assert row.split()[0] == "chat" and row.split()[2] == POOL
    assert row.split()[3].endswith("/1") and row.split()[4] == "1"
    wide = await cli.run("get", "svc", "chat", "-o", "wide")
    assert wide.out.splitlines()[0].split()[7:] == ["GEN", "NODES", "UPDATED", "WAITING", "REASON"]
    assert (
        json.loads((await cli.run("get", "service", "chat", "-o", "json")).out)["uid"]
        == (created["uid"])
    )
    found = await cli.run("get", "services", "--name-contains", "CH", "--pool", POOL, "-o", "json")
    other_pool = await cli.run("get", "services", "--pool", "nope", "-o", "json")
    wrong_state = await cli.run("get", "services", "--state", "RUNNING")
    assert [s["name"] for s in json.loads(found.out)["items"]] == ["chat"], found.err
    assert json.loads(other_pool.out) == {"items": []}
    assert wrong_state.code == 2 and "'RUNNING' is not a service state" in wrong_state.err

    # What `get -o yaml` prints applies back unchanged, alone and as a list.
    (tmp_path / "one.yaml").write_text((await cli.run("get", "svc", "chat", "-o", "yaml")).out)
    (tmp_path / "list.yaml").write_text((await cli.run("get", "services", "-o", "yaml")).out)
    back = await cli.run("apply", "-f", "one.yaml", "-f", "list.yaml")
    assert back.out == "service/chat unchanged\nservice/chat unchanged\n", back.err

    # scale: a new generation, printed; a count out of range and an unknown service are one
    # line each.
    scaled = await cli.run("scale", "service", "chat", "--replicas", "2")
    too_many = await cli.run("scale", "svc", "chat", "--replicas", "65")
    unknown = await cli.run("scale", "svc", "nope", "--replicas", "1")
    assert (scaled.code, scaled.out) == (
        0,
        "service/chat scaled to 2 replicas (generation 2)\n",
    ), scaled.err
    assert too_many.code == 1 and too_many.error_lines == [
        "error: Request body is invalid: 1 field is invalid (--replicas: must be at most 64)"
    ]
    assert unknown.code == 1 and unknown.error_lines == [
        "error: Not found: Service 'nope' not found."
    ]
    after_scale = await stored(running_service, "chat")
    assert after_scale is not None
    assert (after_scale["generation"], after_scale["spec"]["replicas"]) == (2, 2)

    # apply of a changed file: the server's dry run changes nothing; the real one does.
    (tmp_path / "s.yaml").write_text(SERVICE + "replicas: 3\n")
    dry = await cli.run("apply", "-f", "s.yaml", "--dry-run")
    assert dry.out.splitlines()[0] == "service/chat replaced (dry run)"
    assert "-replicas: 2\n+replicas: 3" in dry.out
    assert (await stored(running_service, "chat") or {})["generation"] == 2
    replaced = await cli.run("apply", "-f", "s.yaml")
    assert replaced.out == "service/chat replaced\n", replaced.err
    assert (await stored(running_service, "chat") or {})["spec"]["replicas"] == 3

    described = await cli.run("describe", "service", "chat")
    assert described.code == 0, described.err
    lines = described.out.splitlines()
    assert lines[0].split() == ["Name:", "chat"]
    assert next(line for line in lines if line.startswith("Generation:")).split()[1] == "3"
    assert "Pods:" in lines and "Events:" in lines
    assert ["Readiness", "path:", "/healthz"] in [line.split() for line in lines]
    assert ["Port:", "8000"] in [line.split() for line in lines]
    events = "\n".join(lines[lines.index("Events:") :])
    assert "Accepted" in events and "scaled to 2 replicas" in events

    # delete: DELETING at once (the reconciler may already have removed it).
    deleted = await cli.run("delete", "service", "chat")
    assert (deleted.code, deleted.out) == (0, "service/chat deleting\n"), deleted.err
    gone = await stored(running_service, "chat")
    assert gone is None or gone["status"]["state"] == "DELETING"
    refused = await cli.run("scale", "svc", "chat", "--replicas", "1")
    assert refused.code == 1 and len(refused.error_lines) == 1


async def test_the_reconciler_takes_an_applied_service_out_of_pending_and_delete_wait_ends_it(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    cli = admin_cli(running_service, tmp_path)
    (tmp_path / "s.yaml").write_text(SERVICE)
    assert (await cli.run("apply", "-f", "s.yaml")).out == "service/chat created\n"

    async def reconciled() -> dict[str, Any] | None:
        found = await stored(running_service, "chat")
        return found if found and found["status"]["state"] != "PENDING" else None

    found = await wait_until(reconciled, timeout=60, message="service chat out of PENDING")

    assert found["status"]["observed_generation"] == 1
    row = (await cli.run("get", "svc", "chat")).out.splitlines()[1].split()
    assert row[0] == "chat" and row[1] != "PENDING" and row[2] == POOL
    described = (await cli.run("describe", "svc", "chat")).out.splitlines()
    state = next(line for line in described if line.strip().startswith("State:"))
    assert state.split()[1] != "PENDING"
    gone = await cli.run("delete", "service", "chat", "--wait", timeout=120)
    assert gone.code == 0, gone.err
    assert gone.out == "service/chat deleting\nservice/chat deleted\n"
    assert await stored(running_service, "chat") is None


async def test_get_w_follows_services_and_the_watch_of_one_ends_once_it_is_deleted(
    running_service: RunningService, tmp_path: Path
) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool()
    cli = admin_cli(running_service, tmp_path)
    async with cli.start("get", "services", "-w", "-o", "json") as watch:
        await wait_until(lambda: open_streams(running_service) >= 1, message="a stream")
        await scenario.create_service("chat")
        events = [await watch.event()]
        assert (events[0]["type"], events[0]["object"]["name"]) == ("ADDED", "chat")
        async with cli.start("get", "service", "chat", "-w") as one:
            assert (await one.line()).split() == [
                "EVENT", "NAME", "STATE", "POOL", "READY", "GPUS", "ENDPOINT", "AGE", "REASON"
            ]  # fmt: skip
            assert (await one.line()).split()[:2] == ["ADDED", "chat"]
            scaled = await cli.run("scale", "svc", "chat", "--replicas", "2")
            assert scaled.code == 0, scaled.err
            while events[-1]["object"]["generation"] != 2:
                events.append(await watch.event())
            assert events[-1]["type"] == "MODIFIED"
            assert events[-1]["object"]["spec"]["replicas"] == 2
            deleted = await cli.run("delete", "service", "chat")
            assert deleted.code == 0, deleted.err
            while events[-1]["type"] != "DELETED":
                events.append(await watch.event(timeout=120))
            # The watch of the one service ends by itself once it is gone.
            code, err = await one.exit_code(timeout=30)
            assert one.process.stdout is not None
            rest = (await one.process.stdout.read()).decode().splitlines()
    assert code == 0, err
    assert rest[-1].split()[:3] == ["DELETED", "chat", "DELETING"]
    assert {e["type"] for e in events[1:-1]} == {"MODIFIED"}
    assert {e["object"]["name"] for e in events} == {"chat"}
