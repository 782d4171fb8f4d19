"""The `aicp` command line against a running aicp on kubesim: watches that miss nothing (across
a dropped connection, across replicas), tenancy and revocation on streams, and one clear line
for each kind of failure.

The CLI runs as a subprocess (the installed console script), with its own config directory;
it reaches the service only over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from kubesim import Cluster
from tests.support.api_client import ADMIN_TOKEN
from tests.support.cli import AICP, Cli, TcpProxy
from tests.support.pg_fixtures import connected
from tests.support.scenario import PROJECT, WORKLOADS
from tests.support.service import RunningService, TwoReplicas, start_service
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(90)

#: Slow enough at each step that the reconciler records every state: the image pull keeps the
#: admitted Job's pod Pending (ADMITTED) before it runs (RUNNING) for a while.
STEPS = {"KUBESIM_PULL_SECONDS": "0.5", "KUBESIM_RUN_SECONDS": "1"}
ORDER = ["PENDING", "QUEUED", "ADMITTED", "RUNNING", "SUCCEEDED"]


def admin_cli(running: RunningService, home: Path, url: str | None = None) -> Cli:
    token = running.service.settings.admin_token
    assert token is not None
    return Cli(url or running.url, token, home, project=PROJECT)


async def changes_of(database_url: str, name: str) -> list[str]:
    """The states of every change the database recorded for the workload, in order."""
    async with connected(database_url) as conn:
        rows = await conn.fetch(
            "SELECT state FROM workload_changes WHERE name = $1 ORDER BY change_id", name
        )
    return [row["state"] for row in rows]


def open_streams(running: RunningService) -> int:
    feed = running.service.feed
    return 0 if feed is None else feed.open_streams


def distinct(states: list[str]) -> list[str]:
    return [s for i, s in enumerate(states) if i == 0 or states[i - 1] != s]


async def listed(watch: Any, running: RunningService) -> None:
    """Return once the watch's first read is behind it: the stream is registered before it
    lists what exists, and a workload submitted in between is first shown as it is then (QUEUED,
    say), not from PENDING. A marker workload's first event can only come after that read."""
    await wait_until(lambda: open_streams(running) >= 1, message="a stream")
    await running.scenario().submit("marker", accelerators=1, cpu="1", memory="1Gi")
    while (await watch.event())["object"]["name"] != "marker":
        pass


async def event_of(watch: Any, name: str) -> dict[str, Any]:
    """The watch's next event for workload `name` (the marker's are skipped)."""
    while True:
        event: dict[str, Any] = await watch.event()
        if event["object"]["name"] == name:
            return event


async def test_the_console_script_is_installed_and_never_imports_the_service() -> None:
    assert AICP.exists(), "make venv installs .venv/bin/aicp"
    process = await asyncio.create_subprocess_exec(
        str(AICP.parent / "python"),
        "-c",
        "import sys, aicp_cli.main; print(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('app', 'kubesim')))",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    assert out.decode().strip() == "[]"


async def test_get_w_sees_queued_admitted_running_succeeded_in_order_with_no_gaps(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    cli = admin_cli(running_service, tmp_path)
    async with cli.start("get", "workloads", "-w", "-o", "json") as watch:
        await listed(watch, running_service)
        await running_service.scenario().submit("train-7b", env=STEPS)
        events = []
        while not events or events[-1]["object"]["status"]["state"] != "SUCCEEDED":
            events.append(await event_of(watch, "train-7b"))
    states = [e["object"]["status"]["state"] for e in events]
    assert distinct(states) == ORDER
    assert events[0]["type"] == "ADDED" and {e["type"] for e in events[1:]} == {"MODIFIED"}
    # No gap: exactly the changes the database committed, in its order.
    assert states == await changes_of(running_service.database_url, "train-7b")


async def test_a_dropped_connection_is_resumed_with_last_event_id_and_misses_nothing(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    async with TcpProxy(running_service.service.port) as proxy:
        cli = admin_cli(running_service, tmp_path, url=proxy.url)
        async with cli.start("get", "workloads", "-w", "-o", "json") as watch:
            await listed(watch, running_service)
            await running_service.scenario().submit(
                "train-7b", env={**STEPS, "KUBESIM_PULL_SECONDS": "1"}
            )
            events = [await event_of(watch, "train-7b"), await event_of(watch, "train-7b")]
            proxy.cut()  # the network drops the stream; the workload goes on meanwhile
            while events[-1]["object"]["status"]["state"] != "SUCCEEDED":
                events.append(await event_of(watch, "train-7b"))
    states = [e["object"]["status"]["state"] for e in events]
    assert distinct(states) == ORDER
    assert states == await changes_of(running_service.database_url, "train-7b")
    ids = [int(e["id"]) for e in events[1:] if e.get("id")]
    assert ids == sorted(set(ids))  # nothing repeated


async def test_a_watcher_on_one_replica_sees_what_the_other_reconciles(
    two_replicas: TwoReplicas, tmp_path: Path
) -> None:
    acceptor, watcher_side = two_replicas.first, two_replicas.second
    await acceptor.scenario().setup_pool()
    cli = admin_cli(watcher_side, tmp_path)
    async with cli.start("get", "workloads", "-w", "-o", "json") as watch:
        await listed(watch, watcher_side)
        # Accepted by the first replica, which leases it and so reconciles it.
        await acceptor.scenario().submit("train-7b", env=STEPS)
        events = [await event_of(watch, "train-7b")]
        while events[-1]["object"]["status"]["state"] != "SUCCEEDED":
            events.append(await event_of(watch, "train-7b"))
    states = [e["object"]["status"]["state"] for e in events]
    assert distinct(states) == ORDER
    assert states == await changes_of(acceptor.database_url, "train-7b")
    trail = (await acceptor.client.get(f"{WORKLOADS}/train-7b/events")).json()["items"]
    actors = {e["actor"] for e in trail if e["type"] in ("Admitted", "Started", "Succeeded")}
    assert actors == {f"controller:{acceptor.instance_id}"}  # reconciled by the other one


async def test_a_revoked_token_ends_its_watch_with_one_clear_line(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    await running_service.scenario().submit("train-7b", env={"KUBESIM_RUN_SECONDS": "60"})
    made = await running_service.client.post(
        f"/api/v1/projects/{PROJECT}/tokens", json={"name": "watcher", "role": "viewer"}
    )
    token = made.json()["token"]
    viewer = Cli(running_service.url, token, tmp_path, project=PROJECT)
    async with viewer.start("get", "workloads", "-w") as watch:
        assert (await watch.line()).startswith("EVENT")
        await watch.line()
        revoked = await running_service.client.delete(
            f"/api/v1/projects/{PROJECT}/tokens/{made.json()['id']}"
        )
        assert revoked.status_code == 204
        started = time.monotonic()
        code, err = await watch.exit_code()
    assert time.monotonic() - started < 5
    assert code == 1
    assert err.strip().splitlines()[-1] == "error: Unauthorized: The token has been revoked."
    assert "Traceback" not in err


async def test_another_projects_token_cannot_watch_or_see_this_projects_workloads(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    await running_service.scenario().submit("train-7b")
    await running_service.api.create_project("other")
    token = await running_service.api.create_token("other", "admin")
    outsider = Cli(running_service.url, token, tmp_path, project=PROJECT)
    watched = await outsider.run("get", "workloads", "train-7b", "-w")
    assert (watched.code, watched.error_lines) == (
        1,
        ["error: Not found: Project 'research' not found."],
    )
    own = await outsider.run("-p", "other", "get", "workloads", "-o", "json")
    assert own.code == 0 and '"items": []' in own.out


async def test_bad_yaml_unknown_fields_and_a_server_that_is_down_each_give_one_clear_line(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    cli = admin_cli(running_service, tmp_path)
    (tmp_path / "bad.yaml").write_text("name: x\n  compute_pool: [\n")
    (tmp_path / "typo.yaml").write_text("name: x\ncompute_pool: h100-pool\nimage: i\nreplica: 3\n")

    bad = await cli.run("apply", "-f", "bad.yaml")
    typo = await cli.run("apply", "-f", "typo.yaml")
    down = await cli.run("get", "workloads", AICP_URL="http://127.0.0.1:9")

    assert bad.code == 1 and bad.error_lines == [
        "error: bad.yaml: not valid YAML or JSON: mapping values are not allowed here at line "
        "2, column 15"
    ]
    assert typo.code == 1 and typo.error_lines[0] == (
        "error: typo.yaml: workload/x: Request body is invalid: 1 field is invalid "
        "(replica: unknown field)"
    )
    assert down.code == 1 and len(down.error_lines) == 1
    assert down.error_lines[0].startswith("error: cannot reach aicp at http://127.0.0.1:9: ")
    for result in (bad, typo, down):
        assert "Traceback" not in result.err


async def test_apply_creates_then_leaves_alone_then_replaces_and_dry_run_changes_nothing(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    cli = admin_cli(running_service, tmp_path)
    spec = "name: w\ncompute_pool: h100-pool\nimage: busybox\nenv: {KUBESIM_RUN_SECONDS: '60'}\n"
    (tmp_path / "w.yaml").write_text(spec)
    assert (await cli.run("apply", "-f", "w.yaml")).out == "workload/w created\n"
    assert (await cli.run("apply", "-f", "w.yaml")).out == "workload/w unchanged\n"
    (tmp_path / "w.yaml").write_text(spec.replace("busybox", "busybox:2"))
    dry = await cli.run("apply", "-f", "w.yaml", "--dry-run")
    assert dry.out.splitlines()[0] == "workload/w replaced (dry run)"
    assert "-image: busybox\n+image: busybox:2" in dry.out
    assert (await running_service.scenario().workload("w") or {})["generation"] == 1
    assert (await cli.run("apply", "-f", "-", stdin=spec.replace("busybox", "busybox:2"))).out == (
        "workload/w replaced\n"
    )
    assert (await running_service.scenario().workload("w") or {})["generation"] == 2


async def test_the_start_deadline_is_set_by_run_shown_by_describe_and_kept_by_apply(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    cli = admin_cli(running_service, tmp_path)
    run = await cli.run(
        "run", "--pool", "h100-pool", "--image", "i", "--name", "quick", "--start-deadline", "90",
        "--env", "KUBESIM_RUN_SECONDS=60", "--", "python", "train.py",
    )  # fmt: skip
    assert run.out == "workload/quick created\n", run.err
    described = await cli.run("describe", "workload", "quick")
    assert "Start deadline" in described.out and "90 s after admission" in described.out
    shown = await cli.run("get", "workload", "quick", "-o", "json")
    assert json.loads(shown.out)["spec"]["start_deadline_seconds"] == 90

    # A file that names no start deadline gets the installation's, and applying it again
    # leaves it alone; naming one replaces it.
    spec = "name: w\ncompute_pool: h100-pool\nimage: busybox\nenv: {KUBESIM_RUN_SECONDS: '60'}\n"
    (tmp_path / "w.yaml").write_text(spec)
    assert (await cli.run("apply", "-f", "w.yaml")).out == "workload/w created\n"
    assert "3600 s after admission" in (await cli.run("describe", "workload", "w")).out
    assert (await cli.run("apply", "-f", "w.yaml")).out == "workload/w unchanged\n"
    (tmp_path / "w.yaml").write_text(spec + "start_deadline_seconds: 600\n")
    assert (await cli.run("apply", "-f", "w.yaml")).out == "workload/w replaced\n"
    assert "600 s after admission" in (await cli.run("describe", "workload", "w")).out


async def test_wait_exits_with_the_reason_when_the_workload_fails_and_124_on_timeout(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    cli = admin_cli(running_service, tmp_path)
    run = await cli.run(
        "run", "--pool", "h100-pool", "--gpus", "1", "--image", "i", "--name", "broken",
        "--env", "KUBESIM_EXIT_CODE=3", "--", "python", "train.py",
    )  # fmt: skip
    assert run.out == "workload/broken created\n"
    failed = await cli.run("wait", "broken", "--timeout", "30s")
    assert failed.code == 1
    # The error is the last line the command writes; a note that it resumed a dropped stream
    # (its progress display prints those when it closes) may follow it.
    errors = [line for line in failed.error_lines if line.startswith("error: ")]
    assert errors[-1].startswith("error: workload broken ended FAILED: "), failed.error_lines
    assert "exited with code 3" in errors[-1]
    await running_service.scenario().submit("long", env={"KUBESIM_RUN_SECONDS": "600"})
    late = await cli.run("wait", "long", "--timeout", "1s")
    assert late.code == 124
    late_errors = [line for line in late.error_lines if line.startswith("error: ")]
    assert late_errors[-1].startswith("error: timed out after 1s waiting for workload long")


async def test_hostile_text_is_stored_as_given_and_printed_escaped_at_80_columns(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    cli = admin_cli(running_service, tmp_path)
    hostile = ["--note", "\x1b]0;pwned\x07\x1b[2J\u202eexe.txt\x9b31m"]
    await running_service.scenario().submit(
        "hostile", args=hostile, env={"KUBESIM_RUN_SECONDS": "600"}
    )
    assert (
        await cli.run("wait", "hostile", "--for", "state=RUNNING", "--timeout", "30s")
    ).code == 0
    listed = await cli.run("get", "workloads", "-o", "json")
    stored = json.loads(listed.out)["items"][0]
    assert stored["spec"]["args"] == hostile

    described = await cli.run("describe", "workload", "hostile")
    narrow = await cli.run("get", "workloads", COLUMNS="80")
    wide = await cli.run("get", "workloads", "-o", "wide", COLUMNS="80")
    for shown in (described, narrow, wide):
        assert shown.code == 0, shown.err
        assert [c for c in shown.out if unicodedata.category(c) == "Cc" and c != "\n"] == []
        assert "\u202e" not in shown.out
    assert "--note \\x1b]0;pwned\\x07\\x1b[2J\\u202eexe.txt\\x9b31m" in described.out
    row = narrow.out.splitlines()[1]
    assert row.split()[:2] == ["hostile", "RUNNING"]
    assert len(row) == 80 and row.endswith("…")
    assert wide.out.splitlines()[1].endswith(stored["status"]["reason"])


# About 30 s on an idle machine, 21 s of them the outage it is about: the file's 90 s is too
# little for a loaded one.
@pytest.mark.timeout(180)
async def test_a_watch_survives_a_restart_of_the_server_and_misses_nothing(
    database_url: str,
    kube_cluster_with_controllers: Cluster,
    tmp_path: Path,
    no_ambient_kubernetes: None,
) -> None:
    cluster = kube_cluster_with_controllers
    async with TcpProxy(0) as proxy, contextlib.AsyncExitStack() as watching:
        cli = Cli(proxy.url, ADMIN_TOKEN, tmp_path, project=PROJECT)
        async with start_service(database_url, cluster, tmp_path, instance_id="before") as first:
            proxy.target_port = first.service.port
            await first.scenario().setup_pool()
            watch = await watching.enter_async_context(
                cli.start("get", "workloads", "-w", "-o", "json")
            )
            await wait_until(lambda: open_streams(first) >= 1, message="a stream")
            await first.scenario().submit("train-7b", env={**STEPS, "KUBESIM_PULL_SECONDS": "2"})
            events = [await watch.event(), await watch.event()]  # ADDED, QUEUED
        # The server is down: the watch keeps trying, well past the six attempts (about 11 s)
        # after which it used to give up.
        down_from = proxy.attempts
        await wait_until(
            lambda: proxy.attempts >= down_from + 8,
            timeout=60,
            message="eight attempts of the watch while the server is down",
        )
        assert watch.process.returncode is None
        async with start_service(database_url, cluster, tmp_path, instance_id="after") as second:
            proxy.target_port = second.service.port
            while events[-1]["object"]["status"]["state"] != "SUCCEEDED":
                events.append(await watch.event(timeout=30))
            watch.process.terminate()
            _, err = await watch.exit_code()
    states = [e["object"]["status"]["state"] for e in events]
    assert states == await changes_of(database_url, "train-7b")  # no gap, nothing repeated
    assert err.splitlines() == ["note: the connection dropped; resuming", "note: resumed"]


async def test_people_clean_up_by_several_names_selectors_and_token_names(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    cli = admin_cli(running_service, tmp_path)
    for name in ("a", "b", "c"):
        await running_service.scenario().submit(
            name, accelerators=1, env={"KUBESIM_RUN_SECONDS": "600"}
        )
    await running_service.scenario().submit(
        "broken", accelerators=1, env={"KUBESIM_EXIT_CODE": "1"}
    )
    await running_service.scenario().wait_state("broken", "FAILED")

    several = await cli.run("delete", "workloads", "a", "b")
    unconfirmed = await cli.run("delete", "workloads", "--state", "failed")
    assert (several.code, several.out) == (0, "workload/a deleting\nworkload/b deleting\n")
    assert (unconfirmed.code, unconfirmed.error_lines) == (
        1,
        ["error: not deleting 1 workload in project research without confirmation: pass --yes"],
    )
    assert (await running_service.scenario().workload("broken") or {})["status"][
        "state"
    ] == "FAILED"
    failed = await cli.run("delete", "workloads", "--state", "FAILED", "--yes")
    assert (failed.code, failed.out) == (0, "workload/broken deleting\n")
    everything = await cli.run("delete", "workloads", "--all", "--yes", "--wait")
    assert everything.code == 0, everything.err
    assert "workload/c deleting" in everything.out and "workload/c deleted" in everything.out
    listed = await Cli(running_service.url, cli.token, tmp_path).run(
        "get", "workloads", "-o", "json", "-p", PROJECT
    )  # the project given after the subcommand, as kubectl users type it
    assert (listed.code, json.loads(listed.out)) == (0, {"items": []})

    made = await cli.run("create", "token", "ci", "--role", "viewer")
    revoked = await cli.run("delete", "token", "ci")
    missing = await cli.run("delete", "token", "nope")
    assert made.code == 0 and (revoked.code, revoked.out) == (0, "token/ci revoked\n")
    assert missing.error_lines == [
        "error: token nope does not exist in project research (no token of that name or id)"
    ]
    gone = await cli.run("delete", "pool", "h100-pool")
    assert (gone.code, gone.out) == (0, "pool/h100-pool deleting\n")


async def test_errors_name_what_is_missing_and_where(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    cli = admin_cli(running_service, tmp_path)
    nope = await cli.run("run", "--pool", "nope", "--image", "i", "--", "train")
    odd = await cli.run("get", "workloads", "a?b#c%2F")
    kube = running_service.cluster.url
    not_aicp = await cli.run("login", "--url", kube, "--token", "x", AICP_URL="", AICP_TOKEN="")
    assert nope.error_lines == [
        "error: Request body is invalid: 1 field is invalid (--pool: compute pool 'nope' does "
        "not exist in project research)"
    ]
    assert odd.error_lines == ["error: Not found: Workload 'a?b#c%2F' not found."]
    assert not_aicp.code == 1 and len(not_aicp.error_lines) == 1
    assert not_aicp.error_lines[0].startswith(f"error: {kube} is not an aicp API: ")


async def test_wait_prints_its_result_once_and_events_name_the_token(
    running_service: RunningService, tmp_path: Path
) -> None:
    await running_service.scenario().setup_pool()
    admin = admin_cli(running_service, tmp_path)
    token = (await admin.run("create", "token", "lead", "--role", "editor")).out.strip()
    lead = Cli(running_service.url, token, tmp_path, project=PROJECT)
    run = await lead.run("run", "--pool", "h100-pool", "--image", "i", "--name", "w", "--", "x")
    assert run.code == 0, run.err
    waited = await lead.run("wait", "w", "--timeout", "30s")
    assert waited.code == 0
    assert waited.out.count("SUCCEEDED") == 1 and "SUCCEEDED" not in waited.err
    described = await lead.run("describe", "workload", "w")
    assert "Accepted" in described.out and "[token lead]" in described.out


async def test_get_workloads_name_contains_lists_only_the_matching_names(
    running_service: RunningService, tmp_path: Path
) -> None:
    scenario = running_service.scenario()
    await scenario.setup_pool()
    for name in ("train-7b", "eval-7b"):
        await scenario.submit(name, accelerators=0)
    cli = admin_cli(running_service, tmp_path)
    found = await cli.run("get", "workloads", "--name-contains", "TRAIN", "-o", "json")
    assert found.code == 0, found.err
    assert [w["name"] for w in json.loads(found.out)["items"]] == ["train-7b"]
    long = await cli.run("get", "workloads", "--name-contains", "x" * 41)
    assert long.code != 0 and "name_contains" in long.err
    pools = await cli.run("get", "pools", "--name-contains", "x")
    assert pools.code != 0 and "apply to workloads and services only" in pools.err
