"""`aicp get`, `aicp describe`, `aicp logs` and `aicp wait`."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from aicp_cli import progress
from aicp_cli.arguments import (
    STATE,
    STATE_LIST,
    complete_kinds,
    complete_names,
    complete_workloads,
    states_of,
)
from aicp_cli.errors import ApiError, CliError
from aicp_cli.kinds import SERVICE_STATES, WORKLOAD_STATES, by_name, kind_named
from aicp_cli.output import (
    FORMATS,
    cell,
    dump,
    dump_event,
    line_width,
    printable,
    row_line,
    table,
)
from aicp_cli.service_views import describe_service
from aicp_cli.session import client_for, project_of
from aicp_cli.workload_views import describe_project, describe_workload

if TYPE_CHECKING:
    from aicp_cli.client import Client
    from aicp_cli.kinds import Kind

STATES = WORKLOAD_STATES
FINISHED = ("SUCCEEDED", "FAILED")


@click.command(short_help="List resources, or show one.")
@click.argument("resource", shell_complete=complete_kinds)
@click.argument("name", required=False, shell_complete=complete_names)
@click.option(
    "-o", "--output", "fmt", type=click.Choice(FORMATS), default="table", show_default=True
)
@click.option(
    "--state",
    type=STATE,
    metavar="STATE",
    help=f"Workloads or services in this state ({STATE_LIST}).",
)
@click.option("--pool", help="Workloads or services of this compute pool.")
@click.option(
    "--name-contains",
    "name_contains",
    metavar="TEXT",
    help="Workloads or services whose name contains TEXT (any case; % and _ are plain characters).",
)
@click.option(
    "-w",
    "--watch",
    is_flag=True,
    help="Then print every change as it happens (workloads, services).",
)
@click.pass_context
def get(
    ctx: click.Context,
    resource: str,
    name: str | None,
    fmt: str,
    state: str | None,
    pool: str | None,
    name_contains: str | None,
    watch: bool,
) -> None:
    """Show workloads, services, pools, projects, tokens or bindings (one by NAME, or all).

    With -w (workloads, services), follow the live stream: a row for each change, as it
    happens.
    """
    kind = kind_named(resource)
    if (state or pool or name_contains) and not kind.states:
        raise CliError("--state, --pool and --name-contains apply to workloads and services only")
    if watch and not kind.watch_widths:
        raise CliError("-w applies to workloads and services only")
    if state:
        (state,) = states_of(kind, (state,))
    with client_for(ctx) as client:
        project = project_of(client) if kind.scoped else None
        if watch:
            _watch(client, kind, project, name, fmt, state, pool, name_contains)
            return
        if name is not None:
            found = client.get(kind.path(project, name))
            if fmt in ("json", "yaml"):
                dump(found, fmt)
            else:
                table([found], kind.wide if fmt == "wide" else kind.columns, whole=fmt == "wide")
            return
        params = {"state": state, "compute_pool": pool, "name_contains": name_contains}
        items = client.items(kind.path(project), **params)
        if fmt in ("json", "yaml"):
            dump({"items": items}, fmt)
        elif not items:
            click.echo(
                f"No {kind.plural} found" + (f" in project {project}." if project else "."),
                err=True,
            )
        else:
            table(items, kind.wide if fmt == "wide" else kind.columns, whole=fmt == "wide")


def _watch(
    client: Client,
    kind: Kind,
    project: str | None,
    name: str | None,
    fmt: str,
    state: str | None,
    pool: str | None,
    name_contains: str | None = None,
) -> None:
    if name is not None:
        path, params = kind.path(project, name) + "/watch", {}
    else:
        path = kind.path(project)
        params = {
            "watch": "true",
            "state": state.upper() if state else None,
            "compute_pool": pool,
            "name_contains": name_contains,
        }
    columns = kind.wide if fmt == "wide" else kind.columns
    titles = [title for title, _ in columns]
    widths = [max(len(t), w) for t, w in zip(titles, kind.watch_widths, strict=False)]
    limit = None if fmt == "wide" else line_width()
    if fmt in ("table", "wide"):
        click.echo(row_line(["EVENT", *titles], [8, *widths], titles[-1], limit))
    for event in client.watch(path, params, on_reconnect=progress.note):
        if fmt in ("json", "yaml"):
            dump_event(event.type, event.object, fmt)
            continue
        values = [cell(get(event.object)) for _, get in columns]
        click.echo(row_line([printable(event.type), *values], [8, *widths], titles[-1], limit))
        sys.stdout.flush()


@click.command(short_help="Show everything about one workload or service.")
@click.argument("resource", shell_complete=complete_kinds)
@click.argument("name", shell_complete=complete_names)
@click.pass_context
def describe(ctx: click.Context, resource: str, name: str) -> None:
    """Everything about one workload: spec, status and its reason, admission, nodes,
    accelerator evidence and the event timeline; about one service: spec, status, endpoint,
    each replica and the event timeline; or a project with its limits."""
    kind = kind_named(resource)
    if kind.name == "project":
        with client_for(ctx) as client:
            describe_project(client.get(kind.path(None, name)))
        return
    if kind.name not in ("workload", "service"):
        raise CliError(
            "describe shows workloads, services and projects; use 'aicp get RESOURCE NAME "
            "-o yaml' for the rest"
        )
    with client_for(ctx) as client:
        project = project_of(client)
        found = client.get(kind.path(project, name))
        events = client.items(kind.path(project, name) + "/events")
    (describe_service if kind.name == "service" else describe_workload)(found, events)


@click.command(short_help="Print a workload's or a service's logs, or follow them.")
@click.argument("first", metavar="[service] NAME", shell_complete=complete_workloads)
@click.argument("second", required=False, shell_complete=complete_workloads)
@click.option("-f", "--follow", is_flag=True, help="Keep printing lines as they are written.")
@click.option(
    "--tail", type=click.IntRange(1, 10000), default=100, show_default=True, help="Lines per pod."
)
@click.option(
    "--since",
    "since_seconds",
    type=click.IntRange(1),
    help="Only lines newer than this many seconds.",
)
@click.option("--replica", type=click.IntRange(0, 63), help="Only the N-th pod (0-based).")
@click.option(
    "--rank", type=click.IntRange(0, 63), help="Only rank N of a multi-node workload (0-based)."
)
@click.option("--pod", help="A service's: only this replica pod (a name describe lists).")
@click.pass_context
def logs(
    ctx: click.Context,
    first: str,
    second: str | None,
    follow: bool,
    tail: int,
    since_seconds: int | None,
    replica: int | None,
    rank: int | None,
    pod: str | None,
) -> None:
    """Print a workload's logs (its current generation's pods; every rank's lines prefixed
    `[rank N] ` for a multi-node workload). With -f, wait until it runs, then stream until its
    containers end. `aicp logs service NAME` prints a service's replicas' logs instead (each
    line prefixed `[<pod>] ` when there are several; --pod for one replica; -f streams the
    started replicas')."""
    kind = kind_named(first) if second is not None else by_name("workload")
    name = second if second is not None else first
    if kind.name not in ("workload", "service"):
        raise CliError("logs shows workloads and services")
    if kind.name == "service" and (replica is not None or rank is not None):
        raise CliError("--replica and --rank are a workload's; use --pod for a service")
    if kind.name == "workload" and pod is not None:
        raise CliError("--pod is a service's; use --replica or --rank for a workload")
    with client_for(ctx) as client:
        path = kind.path(project_of(client), name)
        params: dict[str, Any] = {"tail": tail, "since_seconds": since_seconds}
        params |= {"pod": pod} if kind.name == "service" else {"replica": replica, "rank": rank}
        if not follow:
            sys.stdout.write(client.request("GET", path + "/logs", params=params).text)
            return
        if kind.name == "workload":
            _wait_until_started(client, path, name)
        for chunk in client.stream_text(path + "/logs", {**params, "follow": "true"}):
            sys.stdout.write(chunk)
            sys.stdout.flush()


def _wait_until_started(client: Client, path: str, name: str) -> None:
    with progress.Progress(name) as shown:
        for event in client.watch(path + "/watch", on_reconnect=progress.note):
            state = event.object["status"]["state"]
            shown.update(state, event.object["status"]["reason"])
            if state in ("RUNNING", *FINISHED):
                return
            if event.type == "DELETED":
                raise CliError(f"workload {name} was deleted before it ran")


def _duration(text: str) -> float:
    """`90`, `90s`, `10m`, `2h`, `1h30m` → seconds."""
    total, number, units = 0.0, "", {"s": 1, "m": 60, "h": 3600, "d": 86400}
    for char in text.strip():
        if char.isdigit() or char == ".":
            number += char
        elif char in units and number:
            total += float(number) * units[char]
            number = ""
        else:
            raise click.BadParameter(
                f"{text!r} is not a duration like 90s, 10m or 1h30m", param_hint="'--timeout'"
            )
    if number:
        total += float(number)
    return total


@click.command(short_help="Wait until a workload or a service reaches a state.")
@click.argument("first", metavar="[service] NAME", shell_complete=complete_workloads)
@click.argument("second", required=False, shell_complete=complete_workloads)
@click.option(
    "--for",
    "condition",
    default=None,
    help="state=STATE[,STATE...], or delete (default: state=SUCCEEDED for a workload, "
    "state=READY for a service).",
)
@click.option(
    "--timeout", default="10m", show_default=True, help="Give up after this long (90s, 10m, 1h)."
)
@click.pass_context
def wait(
    ctx: click.Context, first: str, second: str | None, condition: str | None, timeout: str
) -> int:
    """Wait until a workload reaches a state (for CI): exit 0 when it does; 1 with the reason
    when it ends otherwise; 124 when the time runs out. `aicp wait service NAME` waits for a
    service (READY unless --for says otherwise; a service never ends by itself)."""
    kind = kind_named(first) if second is not None else by_name("workload")
    name = second if second is not None else first
    if kind.name not in ("workload", "service"):
        raise CliError("wait follows workloads and services")
    service = kind.name == "service"
    states = SERVICE_STATES if service else STATES
    default = "state=READY" if service else "state=SUCCEEDED"
    wanted, deleting = _condition(condition or default, states)
    deadline = time.monotonic() + _duration(timeout)
    with client_for(ctx) as client:
        path = kind.path(project_of(client), name)
        try:
            return _wait(client, path, Waited(kind.name, name, wanted, deleting), deadline, timeout)
        except ApiError as exc:
            if deleting and exc.status == 404:
                click.echo(f"{kind.name}/{name} deleted")
                return 0
            raise


def _condition(condition: str, states: tuple[str, ...]) -> tuple[set[str], bool]:
    if condition.strip().lower() == "delete":
        return set(), True
    key, _, value = condition.partition("=")
    wanted = {s.strip().upper() for s in value.split(",") if s.strip()}
    if key.strip().lower() != "state" or not wanted or not wanted <= set(states):
        raise click.BadParameter(
            f"{condition!r}: use state=STATE (one of {', '.join(states)}) or delete",
            param_hint="'--for'",
        )
    return wanted, False


@dataclass(frozen=True)
class Waited:
    """What `wait` waits for: a workload or service, by name, reaching one of `wanted` (or,
    with `deleting`, gone)."""

    kind: str
    name: str
    wanted: set[str]
    deleting: bool

    @property
    def finished(self) -> tuple[str, ...]:
        """The states it cannot leave (a workload's end; a service has none)."""
        return FINISHED if self.kind == "workload" else ()


def _wait(client: Client, path: str, waited: Waited, deadline: float, timeout: str) -> int:
    last: dict[str, Any] = {}
    kind, name, wanted, deleting = waited.kind, waited.name, waited.wanted, waited.deleting
    events = client.watch(path + "/watch", on_reconnect=progress.note)
    try:
        with progress.Progress(name) as shown:
            for event in progress.before(events, deadline):
                status = last = event.object["status"]
                ended = status["state"] in waited.finished
                final = event.type == "DELETED" or status["state"] in wanted or ended
                if not final:  # the result itself is printed once, below
                    shown.update(status["state"], status["reason"])
                if event.type == "DELETED":
                    if deleting:
                        click.echo(f"{kind}/{name} deleted")
                        return 0
                    _fail(f"{kind} {name} was deleted ({status['state']}: {status['reason']})")
                    return 1
                if status["state"] in wanted:
                    click.echo(printable(f"{kind}/{name} {status['state']}: {status['reason']}"))
                    return 0
                if ended and not deleting:
                    _fail(f"{kind} {name} ended {status['state']}: {status['reason']}")
                    return 1
    except progress.TimedOut:
        pass
    still = f" (still {last.get('state')}: {last.get('reason')})" if last else ""
    _fail(f"timed out after {timeout} waiting for {kind} {name}{still}")
    return 124


def _fail(message: str) -> None:
    click.echo(f"error: {printable(message)}", err=True)


COMMANDS = [get, describe, logs, wait]
