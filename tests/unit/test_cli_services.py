"""The command line's inference services without a server: the `get` columns, `describe`,
`kind: Service` documents for `apply` (read, planned against a fake HTTP answer, dry run),
and the arguments of `get`, `delete` and `scale`. (Against a server:
tests/e2e/test_cli_services.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from aicp_cli import config
from aicp_cli.client import Client
from aicp_cli.commands_services import scale
from aicp_cli.errors import CliError
from aicp_cli.kinds import SERVICE_COLUMNS, SERVICE_WIDE, kind_named
from aicp_cli.main import cli, main
from aicp_cli.manifests import dry_run, plan, read_documents
from aicp_cli.output import SHRUNK_AT_LEAST, table
from aicp_cli.service_views import describe_service, pod_line
from click.testing import CliRunner
from hypothesis import given, settings
from rich.cells import cell_len

from tests.unit.test_cli_output import hostile_text, printed_by, unsafe

ENDPOINT = "llama-chat.aicp-research.svc:8000"
#: A service's spec as the server stores it (every default filled in).
STORED_SPEC: dict[str, Any] = {
    "name": "llama-chat",
    "compute_pool": "h100-pool",
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
FILE = "kind: Service\nname: llama-chat\ncompute_pool: h100-pool\nimage: ghcr.io/acme/serve:2.1\n"


@pytest.fixture(autouse=True)
def private_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("AICP_URL", "AICP_TOKEN", "AICP_PROJECT", "AICP_CONTEXT", "AICP_CONFIG"):
        monkeypatch.delenv(name, raising=False)


def pod(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "node": "gpu-node-0",
        "phase": "Running",
        "ready": True,
        "restarts": 0,
        "waiting_for_quota": False,
        "last_termination": None,
        **fields,
    }


def service(reason: str = "2 of 2 replicas ready.", **changes: Any) -> dict[str, Any]:
    """A service as the API answers it: READY, 2 replicas of 1 GPU on two nodes; `spec` and
    `status` changes are merged into those, the rest replace the top-level fields."""
    spec = {**STORED_SPEC, **changes.pop("spec", {})}
    status = {
        "state": "READY",
        "reason": reason,
        "observed_generation": 1,
        "endpoint": ENDPOINT,
        "deployment": {"name": "llama-chat", "uid": "d-1"},
        "replicas": {"desired": 2, "ready": 2, "updated": 2, "waiting_for_quota": 0},
        "nodes": ["gpu-node-0", "gpu-node-1"],
        "pods": [pod("llama-chat-a"), pod("llama-chat-b", node="gpu-node-1")],
        "updated_at": "2026-01-01T00:01:00Z",
        **changes.pop("status", {}),
    }
    return {
        "name": spec["name"],
        "project": "research",
        "compute_pool": spec["compute_pool"],
        "uid": "5e7c",
        "generation": 1,
        "spec": spec,
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:01:00Z",
        "created_by": "token lead",
        "status": status,
        **changes,
    }


def rows_of(capsys: pytest.CaptureFixture[str]) -> list[list[str]]:
    return [line.split("   ") for line in capsys.readouterr().out.splitlines()]


def cells(row: list[str]) -> list[str]:
    return [cell.strip() for cell in row if cell.strip()]


# -- get ----------------------------------------------------------------------------------------


def test_a_service_row_shows_ready_of_desired_gpus_per_replica_times_desired_and_the_endpoint(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    degraded = service(
        "1 of 3 replicas ready; llama-chat-c was OOM-killed.",
        name="big",
        spec={"accelerators": 8, "replicas": 3},
        status={
            "state": "DEGRADED",
            "replicas": {"desired": 3, "ready": 1, "updated": 3, "waiting_for_quota": 1},
        },
    )
    table([service(), degraded], SERVICE_COLUMNS)
    header, ready, failing = (cells(row) for row in rows_of(capsys))
    assert header == ["NAME", "STATE", "POOL", "READY", "GPUS", "ENDPOINT", "AGE", "REASON"]
    assert ready[:6] == ["llama-chat", "READY", "h100-pool", "2/2", "1x2", ENDPOINT]
    assert failing[:5] == ["big", "DEGRADED", "h100-pool", "1/3", "8x3"]
    assert failing[-1] == "1 of 3 replicas ready; llama-chat-c was OOM-killed."


@pytest.mark.parametrize(
    ("spec", "status", "ready", "gpus"),
    [
        pytest.param(
            {"replicas": 3}, {"observed_generation": 0}, "0/3", "1x3", id="not-reported-yet"
        ),
        pytest.param(
            {"autoscaling": {"min_replicas": 2, "max_replicas": 4, "target_cpu_percent": 70}},
            {"observed_generation": 0},
            "0/2",
            "1x2",
            id="autoscaled-not-reported-yet",
        ),
        pytest.param(
            {"replicas": 1},
            {"replicas": {"desired": 1, "ready": 1, "updated": 1, "waiting_for_quota": 0}},
            "1/1",
            "1",
            id="one-replica",
        ),
        pytest.param(
            {"replicas": 0},
            {"replicas": {"desired": 0, "ready": 0, "updated": 0, "waiting_for_quota": 0}},
            "0/0",
            "1x0",
            id="scaled-to-zero",
        ),
        pytest.param(
            {"autoscaling": {"min_replicas": 1, "max_replicas": 8, "target_cpu_percent": 70}},
            {"replicas": {"desired": 5, "ready": 4, "updated": 5, "waiting_for_quota": 0}},
            "4/5",
            "1x5",
            id="the-autoscalers-count",
        ),
    ],
)
def test_ready_and_gpus_count_what_the_controller_reports_else_what_the_spec_asks(
    capsys: pytest.CaptureFixture[str],
    spec: dict[str, Any],
    status: dict[str, Any],
    ready: str,
    gpus: str,
) -> None:
    fresh = {"replicas": {"desired": 0, "ready": 0, "updated": 0, "waiting_for_quota": 0}}
    table([service(spec=spec, status={**fresh, **status})], SERVICE_COLUMNS)
    row = cells(rows_of(capsys)[1])
    assert row[3:5] == [ready, gpus]


def test_wide_adds_generations_nodes_updated_and_waiting_and_keeps_the_reason_whole(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    long = "Rolling out generation 3: 1 of 2 replicas updated, 1 waits for quota in h100-pool."
    rolling = service(
        long,
        generation=3,
        status={
            "state": "PROGRESSING",
            "observed_generation": 3,
            "replicas": {"desired": 2, "ready": 1, "updated": 1, "waiting_for_quota": 1},
        },
    )
    table([rolling], SERVICE_WIDE, whole=True)
    header, row = (cells(line) for line in rows_of(capsys))
    assert header == [
        "NAME", "STATE", "POOL", "READY", "GPUS", "ENDPOINT", "AGE",
        "GEN", "NODES", "UPDATED", "WAITING", "REASON",
    ]  # fmt: skip
    assert row[7:] == ["3/3", "gpu-node-0,gpu-node-1", "1", "1", long]


def test_at_80_columns_the_endpoint_is_whole_and_the_reason_keeps_the_least(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    table(
        [service("Waiting for quota: " + "the pool's accelerators are all in use. " * 3)],
        SERVICE_COLUMNS,
    )
    row = capsys.readouterr().out.splitlines()[1]
    assert row.split()[:6] == ["llama-chat", "READY", "h100-pool", "2/2", "1x2", ENDPOINT]
    # The endpoint alone takes 35 cells: the other columns are wider than 80, and the reason
    # keeps the least a table gives it.
    reason = row.split("   ")[-1]
    assert reason.startswith("Waiting for") and reason.endswith("…")
    assert cell_len(reason) == SHRUNK_AT_LEAST


def test_svc_service_and_services_name_the_kind_and_the_shell_completes_them() -> None:
    assert {kind_named(word).name for word in ("svc", "service", "Services")} == {"service"}
    assert kind_named("svc").path("research", "llama-chat") == (
        "/projects/research/services/llama-chat"
    )
    env = {"_AICP_COMPLETE": "bash_complete", "COMP_WORDS": "aicp get s", "COMP_CWORD": "2"}
    completed = CliRunner().invoke(cli, [], env=env, prog_name="aicp")
    assert completed.output.split() == ["plain,service", "plain,services", "plain,svc"]


def failure(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    """The exit status and standard error lines of `aicp ARGS` (the console script's
    handling, which turns every failure into one line)."""
    with pytest.raises(SystemExit) as ended:
        main(list(args))
    return int(str(ended.value.code)), capsys.readouterr().err.splitlines()


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        pytest.param(
            ["get", "svc", "--state", "queued"],
            2,
            "Invalid value for '--state': 'QUEUED' is not a service state (one of PENDING, "
            "PROGRESSING, READY, DEGRADED, DELETING)",
            id="a-workload-state-for-services",
        ),
        pytest.param(
            ["get", "workloads", "--state", "READY"],
            2,
            "Invalid value for '--state': 'READY' is not a workload state (one of PENDING, "
            "QUEUED, ADMITTED, RUNNING, SUCCEEDED, FAILED, DELETING)",
            id="a-service-state-for-workloads",
        ),
        pytest.param(
            ["delete", "services", "--state", "FAILED", "--yes"],
            2,
            "Invalid value for '--state': 'FAILED' is not a service state",
            id="delete-by-a-workload-state",
        ),
        pytest.param(
            ["get", "pools", "-w"],
            1,
            "error: -w applies to workloads and services only",
            id="no-watch-of-pools",
        ),
        pytest.param(
            ["get", "pools", "--pool", "p"],
            1,
            "error: --state, --pool and --name-contains apply to workloads and services only",
            id="filters-of-pools",
        ),
        pytest.param(
            ["scale", "workload", "train", "--replicas", "2"],
            1,
            "error: workloads do not scale; services do: aicp scale service NAME --replicas N",
            id="scale-a-workload",
        ),
        pytest.param(
            ["scale", "svc", "llama-chat", "--replicas", "-1"],
            2,
            "Invalid value for '--replicas': -1 is not in the range x>=0.",
            id="negative-replicas",
        ),
        pytest.param(
            ["scale", "svc", "llama-chat"],
            2,
            "Missing option '--replicas'.",
            id="no-replicas",
        ),
        pytest.param(
            ["describe", "pool", "p"],
            1,
            "error: describe shows workloads, services and projects; use 'aicp get RESOURCE "
            "NAME -o yaml' for the rest",
            id="describe-a-pool",
        ),
    ],
)
def test_arguments_a_service_does_not_take_are_refused_before_the_server_is_asked(
    capsys: pytest.CaptureFixture[str], args: list[str], code: int, said: str
) -> None:
    # No context is saved and none is in the environment: reaching the server would fail
    # with "no context", so each of these is refused before that.
    status, lines = failure(capsys, *args)
    assert status == code
    assert any(said in line for line in lines), lines


def test_states_are_taken_in_any_case_and_sent_as_the_server_spells_them() -> None:
    parsed = scale.make_context("scale", ["svc", "llama-chat", "--replicas", "0"])
    assert parsed.params == {"resource": "svc", "name": "llama-chat", "replicas": 0}
    shown = " ".join(CliRunner().invoke(cli, ["get", "--help"]).output.split())
    assert "services: PENDING, PROGRESSING, READY, DEGRADED, DELETING" in shown


# -- describe -----------------------------------------------------------------------------------


def test_describe_shows_the_spec_the_status_each_replica_and_the_events_oldest_first() -> None:
    crashed = pod(
        "llama-chat-c",
        ready=False,
        restarts=3,
        last_termination={
            "reason": "OOMKilled",
            "exit_code": 137,
            "finished_at": "2026-01-01T00:00:50Z",
        },
    )
    waiting = pod("llama-chat-d", node=None, phase="Pending", ready=False, waiting_for_quota=True)
    found = service(
        "1 of 3 replicas ready; llama-chat-c was OOM-killed.",
        spec={
            "replicas": 3,
            "command": ["python", "-m", "serve"],
            "env": {"MODEL": "llama-3-8b"},
            "autoscaling": {"min_replicas": 1, "max_replicas": 4, "target_cpu_percent": 70},
        },
        status={
            "state": "DEGRADED",
            "replicas": {"desired": 3, "ready": 1, "updated": 3, "waiting_for_quota": 1},
            "pods": [pod("llama-chat-a"), crashed, waiting],
        },
    )
    events = [
        {"at": "2026-01-01T00:00:50Z", "type": "Degraded", "message": "OOM", "actor": "c"},
        {"at": "2026-01-01T00:00:00Z", "type": "Accepted", "message": "gen 1", "actor_name": "l"},
    ]

    printed = printed_by(lambda: describe_service(found, events)).splitlines()

    def value(label: str) -> str:
        return (
            next(line for line in printed if line.strip().startswith(label + ":"))
            .split(":", 1)[1]
            .strip()
        )

    assert value("Name") == "llama-chat" and value("Compute pool") == "h100-pool"
    assert value("Command") == "python -m serve"
    assert value("Replicas").startswith("3 (not used while autoscaling)")
    assert value("Autoscaling") == (
        "1-4 replicas, aiming at 70 % CPU (the autoscaler sets the count)"
    )
    assert value("Accelerators") == "1 per replica"
    assert value("Port") == "8000" and value("Readiness path") == "/healthz"
    assert value("Env") == "MODEL=llama-3-8b"
    assert value("State") == "DEGRADED" and value("Endpoint") == ENDPOINT
    status = printed[printed.index("Status:") :]
    assert "3 ready of 3 desired" not in "\n".join(status)
    assert any("1 ready of 3 desired, 3 updated, 1 waiting for quota" in s for s in status)
    pods = printed[printed.index("Pods:") + 1 : printed.index("Events:")]
    assert pods == [
        "  llama-chat-a: Running on gpu-node-0, ready, 0 restarts",
        "  llama-chat-c: Running on gpu-node-0, not ready, 3 restarts; last ended OOMKilled "
        "(exit code 137) at 2026-01-01T00:00:50Z",
        "  llama-chat-d: Pending, not ready, 0 restarts, waiting for quota",
    ]
    timeline = printed[printed.index("Events:") + 1 :]
    assert [line.split()[1] for line in timeline] == ["Accepted", "Degraded"]
    assert timeline[0].endswith("[l]") and timeline[1].endswith("[c]")


def test_a_service_without_replicas_yet_says_so() -> None:
    fresh = service(
        "Accepted; waiting for the controller to apply the Deployment.",
        status={
            "state": "PENDING",
            "observed_generation": 0,
            "endpoint": None,
            "deployment": None,
            "replicas": {"desired": 0, "ready": 0, "updated": 0, "waiting_for_quota": 0},
            "nodes": [],
            "pods": [],
        },
    )
    printed = printed_by(lambda: describe_service(fresh, [])).splitlines()
    assert printed[printed.index("Pods:") + 1] == "  (none)"
    assert printed[printed.index("Events:") + 1] == "  (none)"
    assert any(line.split() == ["Endpoint:", "-"] for line in printed)
    assert any("0 ready of 2 desired" in line for line in printed)  # the spec's, until reported


@settings(max_examples=100, deadline=None)
@given(reason=hostile_text, arg=hostile_text, name=hostile_text, message=hostile_text)
def test_tables_and_describe_print_a_services_server_text_escaped(
    reason: str, arg: str, name: str, message: str
) -> None:
    def show(reason: str, arg: str, name: str, message: str) -> str:
        found = service(
            reason,
            spec={"args": [arg], "env": {"K": arg}},
            status={
                "endpoint": name,
                "pods": [pod(name, last_termination={"reason": message, "exit_code": 1})],
            },
        )
        event = {"at": "2026-01-01T00:00:00Z", "type": message, "message": message}
        return printed_by(
            lambda: table([found], SERVICE_COLUMNS),
            lambda: table([found], SERVICE_WIDE, whole=True),
            lambda: describe_service(found, [event]),
        )

    printed = show(reason, arg, name, message)
    assert unsafe(printed) == []
    assert printed.count("\n") == show("x", "x", "x", "x").count("\n")  # the layout holds
    assert unsafe(pod_line(pod(name))) == []


# -- apply --------------------------------------------------------------------------------------


def test_a_service_document_is_read_in_a_mixed_file_among_the_other_kinds(tmp_path: Path) -> None:
    (tmp_path / "all.yaml").write_text(
        "name: train\ncompute_pool: h100-pool\nimage: i\n---\n"
        + FILE
        + "replicas: 2\nautoscaling: {max_replicas: 4}\n---\n"
        "kind: service\nname: embed\ncompute_pool: h100-pool\nimage: e\n---\n"
        "kind: ComputePool\nname: h100-pool\naccelerator_class: c\nquota: {accelerators: 1}\n"
    )

    docs = read_documents([str(tmp_path / "all.yaml")])

    assert [(d.source.rsplit("/", 1)[-1], d.kind, d.name) for d in docs] == [
        ("all.yaml#1", "Workload", "train"),
        ("all.yaml#2", "Service", "llama-chat"),
        ("all.yaml#3", "Service", "embed"),
        ("all.yaml#4", "ComputePool", "h100-pool"),
    ]
    assert docs[1].body == {
        "name": "llama-chat",
        "compute_pool": "h100-pool",
        "image": "ghcr.io/acme/serve:2.1",
        "replicas": 2,
        "autoscaling": {"max_replicas": 4},
    }


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_a_service_as_get_prints_it_is_read_back_as_its_spec(tmp_path: Path, fmt: str) -> None:
    shown = service()
    listed = {"items": [service(), {**service(), "name": "b"}], "next_cursor": None}
    dumped = json.dumps if fmt == "json" else yaml.safe_dump
    (tmp_path / f"one.{fmt}").write_text(dumped(shown))
    (tmp_path / f"list.{fmt}").write_text(dumped(listed))

    docs = read_documents([str(tmp_path / f"one.{fmt}"), str(tmp_path / f"list.{fmt}")])

    assert [(d.kind, d.project) for d in docs] == [("Service", "research")] * 3
    assert docs[0].body == STORED_SPEC


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("kind: Service\nimage: i\n", "Service has no 'name'", id="no-name"),
        pytest.param("kind: Deployment\nname: x\n", "(Workload, Service, ComputePool", id="kind"),
    ],
)
def test_a_bad_service_document_is_one_line_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(CliError) as caught:
        read_documents([str(path)])
    assert message in caught.value.message and caught.value.message.startswith(str(path))


class FakeServer:
    """What the API answers, per method and path, and what it was sent: the boundary the
    `Client` talks to, through httpx's MockTransport."""

    def __init__(self, stored: dict[str, Any] | None) -> None:
        self.stored = stored
        self.sent: list[tuple[str, str, dict[str, Any] | None]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.sent.append((request.method, request.url.path, body))
        if request.method == "GET" and self.stored is not None:
            return httpx.Response(200, json=self.stored)
        if request.method == "GET":
            return httpx.Response(404, json={"title": "Not found", "status": 404})
        return httpx.Response(202, json={**service(), "spec": {**STORED_SPEC, **(body or {})}})

    def client(self) -> Client:
        client = Client(config.Context("test", "http://aicp.test", "aicp_test", "research"))
        client.http.close()
        client.http = httpx.Client(base_url="http://aicp.test", transport=httpx.MockTransport(self))
        return client


def planned(tmp_path: Path, text: str, stored: dict[str, Any] | None, *, dry: bool = False) -> Any:
    (tmp_path / "s.yaml").write_text(text)
    (doc,) = read_documents([str(tmp_path / "s.yaml")])
    server = FakeServer(stored)
    client = server.client()
    try:
        step = plan(client, "research", doc)
        if dry:
            step = dry_run(client, step)
    finally:
        client.close()
    return step, server.sent


SERVICES = "/api/v1/projects/research/services"


def test_an_absent_service_is_created_and_an_identical_one_left_alone(tmp_path: Path) -> None:
    created, asked = planned(tmp_path, FILE + "replicas: 2\naccelerators: 1\n", None)
    same, _ = planned(tmp_path, FILE + "replicas: 2\naccelerators: 1\n", service())

    assert (created.action, created.method, created.path) == (
        "created",
        "POST",
        "/projects/research/services",
    )
    assert asked == [("GET", f"{SERVICES}/llama-chat", None)]
    assert (same.action, same.method) == ("unchanged", None)


def test_a_changed_service_is_replaced_with_a_diff_that_ignores_the_defaults(
    tmp_path: Path,
) -> None:
    scaled = {
        **STORED_SPEC,
        "autoscaling": {"min_replicas": 1, "max_replicas": 4, "target_cpu_percent": 70},
    }
    step, _ = planned(tmp_path, FILE + "accelerators: 1\nreplicas: 3\n", service())
    autoscaled, _ = planned(
        tmp_path,
        FILE + "accelerators: 1\nreplicas: 2\nautoscaling: {max_replicas: 4}\n",
        service(spec=scaled),
    )

    assert (step.action, step.method, step.path) == (
        "replaced",
        "PUT",
        "/projects/research/services/llama-chat",
    )
    assert "-replicas: 2\n+replicas: 3\n" in step.diff
    assert "-port" not in step.diff and "+port" not in step.diff  # a default left out
    assert autoscaled.action == "unchanged"  # nor are the autoscaler's
