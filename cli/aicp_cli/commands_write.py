"""`aicp apply`, `aicp run`, `aicp create ...` and `aicp delete ...`."""

from __future__ import annotations

import secrets
import sys
import time
from typing import TYPE_CHECKING

import click

from aicp_cli import manifests, progress
from aicp_cli.arguments import STATE, STATE_LIST, complete_kinds, complete_names, states_of
from aicp_cli.errors import ApiError, CliError, Unreachable
from aicp_cli.kinds import Kind, by_name, kind_named
from aicp_cli.output import admission_lines, printable
from aicp_cli.session import client_for, project_of

if TYPE_CHECKING:
    from aicp_cli.client import Client


@click.command(short_help="Create or replace resources from YAML or JSON files.")
@click.option(
    "-f",
    "--filename",
    "files",
    multiple=True,
    required=True,
    type=click.Path(allow_dash=True),
    help="YAML or JSON file (several documents allowed); - for standard input.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Ask the server what would change (it checks each request as a real apply) and "
    "print the diff; change nothing.",
)
@click.pass_context
def apply(ctx: click.Context, files: tuple[str, ...], dry_run: bool) -> None:
    """Create or replace resources from files: workloads (the default kind), inference
    services (kind: Service), compute pools (kind: ComputePool), projects and accelerator
    bindings. A workload or service whose spec differs is replaced by a new generation; an
    identical one is left alone."""
    documents = manifests.read_documents(list(files))
    failed = 0
    with client_for(ctx) as client:
        project = client.context.project
        for doc in documents:
            label = f"{doc.kind.lower()}/{doc.name}"
            try:
                step = manifests.plan(client, project, doc)
                if dry_run:
                    step = manifests.dry_run(client, step)
                else:
                    manifests.execute(client, step)
            except CliError as exc:
                fatal = isinstance(exc, ApiError) and exc.status in (401, 403, 503)
                if fatal or isinstance(exc, Unreachable):
                    raise
                click.echo(f"error: {doc.source}: {label}: {printable(exc.message)}", err=True)
                failed += 1
                continue
            click.echo(f"{label} {step.action}" + (" (dry run)" if dry_run else ""))
            if dry_run and step.diff:
                click.echo(step.diff.rstrip("\n"))
            for line in admission_lines(step.admission) if dry_run else []:
                click.echo(printable(line))
    if failed:
        raise CliError(f"{failed} of {len(documents)} documents failed", exit_code=1)


class AfterDashes(click.Command):
    """A command whose container command is exactly what follows `--`: before it, an unknown
    option is an error with a suggestion (`--gpu`: did you mean `--gpus`?) and a bare word is
    one too, never silently part of the command."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ours, after = (
            (args[: args.index("--")], args[args.index("--") + 1 :]) if "--" in args else (args, [])
        )
        rest = super().parse_args(ctx, ours)
        if ctx.params.get("command"):
            words = " ".join(ctx.params["command"])
            raise click.UsageError(
                f"unexpected {words!r}: put the container command after --, "
                f"as in: aicp run ... -- {words}",
                ctx,
            )
        ctx.params["command"] = tuple(after)
        return rest


#: The body's fields `aicp run` fills, by the option that fills them (for its errors).
RUN_OPTIONS = {
    "name": "--name",
    "compute_pool": "--pool",
    "image": "--image",
    "accelerators": "--gpus",
    "cpu": "--cpu",
    "memory": "--memory",
    "replicas": "--replicas",
    "nodes": "--nodes",
    "max_runtime_seconds": "--max-runtime",
    "start_deadline_seconds": "--start-deadline",
    "retries": "--retries",
    "priority": "--priority",
}


@click.command(cls=AfterDashes, short_help="Submit a workload in one line.")
@click.option("--pool", required=True, help="The compute pool.")
@click.option("--image", required=True, help="The container image.")
@click.option("--name", help="The workload's name (default: run-<random>).")
@click.option(
    "--gpus",
    "accelerators",
    type=int,
    default=0,
    show_default=True,
    help="Accelerators per replica.",
)
@click.option(
    "--cpu", default="1", show_default=True, help="CPU per replica (a Kubernetes quantity)."
)
@click.option("--memory", default="1Gi", show_default=True, help="Memory per replica.")
@click.option("--replicas", type=int, default=1, show_default=True)
@click.option(
    "--nodes",
    type=int,
    default=1,
    show_default=True,
    help="Ranks of one distributed run (torchrun, JAX): pods that start and fail together.",
)
@click.option(
    "--env", "env", multiple=True, metavar="KEY=VALUE", help="An environment variable (repeat)."
)
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="A label (repeat).")
@click.option("--max-runtime", "max_runtime", type=int, help="Seconds before it is stopped.")
@click.option(
    "--start-deadline",
    "start_deadline",
    type=int,
    help="Seconds after admission it may wait for a pod to start before it fails "
    "(default: the installation's).",
)
@click.option("--retries", type=int, help="Retries of a failed pod.")
@click.option("--priority", type=click.Choice(["low", "normal", "high"]))
@click.option("-w", "--wait", "wait_for", is_flag=True, help="Then wait until it has finished.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Submit nothing: print whether it would be admitted now, whom it would preempt, or "
    "its place in the queue and estimated start (the server checks it as a real submit).",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def run(
    ctx: click.Context,
    pool: str,
    image: str,
    name: str | None,
    accelerators: int,
    cpu: str,
    memory: str,
    replicas: int,
    nodes: int,
    env: tuple[str, ...],
    labels: tuple[str, ...],
    max_runtime: int | None,
    start_deadline: int | None,
    retries: int | None,
    priority: str | None,
    wait_for: bool,
    dry_run: bool,
    command: tuple[str, ...],
) -> int:
    """Submit a workload in one line: aicp run --pool P --gpus 8 --image I -- python train.py
    --epochs 3 (the first word after -- is the command, the rest its arguments)."""
    body: dict[str, object] = {
        "name": name or f"run-{secrets.token_hex(3)}",
        "compute_pool": pool,
        "image": image,
        "accelerators": accelerators,
        "cpu": cpu,
        "memory": memory,
        "replicas": replicas,
        "env": _pairs(env, "--env"),
        "labels": _pairs(labels, "--label"),
    }
    if nodes != 1:
        body["nodes"] = nodes
    if command:
        body["command"], body["args"] = [command[0]], list(command[1:])
    for key, value in (
        ("max_runtime_seconds", max_runtime),
        ("start_deadline_seconds", start_deadline),
        ("retries", retries),
        ("priority", priority),
    ):
        if value is not None:
            body[key] = value
    with client_for(ctx) as client:
        path = by_name("workload").path(project_of(client))
        params = {"dry_run": "true"} if dry_run else None
        try:
            created = client.request("POST", path, body=body, params=params).json()
        except ApiError as exc:
            raise exc.naming(RUN_OPTIONS) from None
        if dry_run:
            click.echo(f"workload/{printable(created['object']['name'])} created (dry run)")
            for line in admission_lines(created.get("admission")):
                click.echo(printable(line))
            return 0
        click.echo(f"workload/{printable(created['name'])} created")
        if not wait_for:
            return 0
    from aicp_cli.commands_read import wait

    return int(
        ctx.invoke(
            wait, first=created["name"], second=None, condition="state=SUCCEEDED", timeout="24h"
        )
    )


def _limits(gpus: tuple[str, ...], cpu: str | None, memory: str | None) -> dict[str, object] | None:
    """The `limits` of a project body from the --limit-* options; None when none is given."""
    if not gpus and cpu is None and memory is None:
        return None
    limits: dict[str, object] = {}
    if gpus:
        counts: dict[str, int] = {}
        for accelerator_class, count in _pairs(gpus, "--limit-gpus").items():
            if not count.isascii() or not count.isdigit():
                raise click.BadParameter(
                    f"{accelerator_class}={count}: the count must be a whole number",
                    param_hint="--limit-gpus",
                )
            counts[accelerator_class] = int(count)
        limits["accelerators"] = counts
    if cpu is not None:
        limits["cpu"] = cpu
    if memory is not None:
        limits["memory"] = memory
    return limits


def _pairs(items: tuple[str, ...], option: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint=f"'{option}'")
        found[key] = value
    return found


@click.group(short_help="Create a token, a pool, a project or a binding.")
def create() -> None:
    """Create a token, a compute pool, a project or an accelerator binding."""


@create.command("token", short_help="Create a project token and print its secret once.")
@click.argument("name")
@click.option(
    "--role", type=click.Choice(["viewer", "editor", "admin"]), default="editor", show_default=True
)
@click.option("--expires-in-days", type=click.IntRange(1, 3650))
@click.pass_context
def create_token(ctx: click.Context, name: str, role: str, expires_in_days: int | None) -> None:
    """A project token; its secret is printed once (store it now)."""
    body: dict[str, object] = {"name": name, "role": role}
    if expires_in_days is not None:
        body["expires_in_days"] = expires_in_days
    with client_for(ctx) as client:
        made = client.request("POST", by_name("token").path(project_of(client)), body=body).json()
    said = f"token/{made['name']} created (id {made['id']}, role {made['role']})"
    click.echo(printable(said), err=True)
    click.echo(made["token"])


@create.command("pool", short_help="Create a compute pool (project admin).")
@click.argument("name")
@click.option("--class", "accelerator_class", required=True, help="The accelerator class.")
@click.option("--gpus", "accelerators", type=int, required=True, help="Accelerators in the quota.")
@click.option("--cpu", required=True, help="CPU in the quota.")
@click.option("--memory", required=True, help="Memory in the quota.")
@click.option("--wait", "wait_ready", is_flag=True, help="Then wait until it is READY.")
@click.pass_context
def create_pool(
    ctx: click.Context,
    name: str,
    accelerator_class: str,
    accelerators: int,
    cpu: str,
    memory: str,
    wait_ready: bool,
) -> None:
    """A compute pool (project admin): a quota of one accelerator class."""
    body = {
        "name": name,
        "accelerator_class": accelerator_class,
        "quota": {"accelerators": accelerators, "cpu": cpu, "memory": memory},
    }
    with client_for(ctx) as client:
        project = project_of(client)
        client.request("POST", by_name("pool").path(project), body=body)
        click.echo(f"pool/{name} created")
        if wait_ready:
            _until_ready(client, by_name("pool").path(project, name), f"pool/{name}")


@create.command("project", short_help="Create a project (platform admin).")
@click.argument("name")
@click.option("--display-name")
@click.option(
    "--limit-gpus",
    "limit_gpus",
    multiple=True,
    metavar="CLASS=N",
    help="At most N accelerators of CLASS in the project's pools (repeatable; once given, a "
    "class not named may have none).",
)
@click.option("--limit-cpu", help="At most this much cpu in the project's pools together.")
@click.option("--limit-memory", help="At most this much memory in the project's pools together.")
@click.option("--wait", "wait_ready", is_flag=True, help="Then wait until it is READY.")
@click.pass_context
def create_project(
    ctx: click.Context,
    name: str,
    display_name: str | None,
    limit_gpus: tuple[str, ...],
    limit_cpu: str | None,
    limit_memory: str | None,
    wait_ready: bool,
) -> None:
    """A project (platform admin): a tenant with its own namespace. Without --limit-*
    options its pools may hold any amount (no ceiling)."""
    body: dict[str, object] = {"name": name}
    if display_name:
        body["display_name"] = display_name
    limits = _limits(limit_gpus, limit_cpu, limit_memory)
    if limits is not None:
        body["limits"] = limits
    with client_for(ctx) as client:
        client.request("POST", "/projects", body=body)
        click.echo(f"project/{name} created")
        if wait_ready:
            _until_ready(client, by_name("project").path(None, name), f"project/{name}")


@create.command("binding", short_help="Bind an accelerator class to GPUs (platform admin).")
@click.argument("accelerator_class")
@click.option("--resource-name", required=True, help="e.g. nvidia.com/gpu")
@click.option("--flavor", required=True, help="The Kueue ResourceFlavor.")
@click.option("--node-label", "node_labels", multiple=True, metavar="KEY=VALUE")
@click.option("--description")
@click.pass_context
def create_binding(
    ctx: click.Context,
    accelerator_class: str,
    resource_name: str,
    flavor: str,
    node_labels: tuple[str, ...],
    description: str | None,
) -> None:
    """An accelerator binding (platform admin): a class mapped to the cluster's GPUs."""
    body: dict[str, object] = {
        "resource_name": resource_name,
        "flavor": flavor,
        "node_labels": _pairs(node_labels, "--node-label"),
    }
    if description:
        body["description"] = description
    with client_for(ctx) as client:
        answer = client.request("PUT", by_name("binding").path(None, accelerator_class), body=body)
    click.echo(
        f"binding/{accelerator_class} {'created' if answer.status_code == 201 else 'replaced'}"
    )


def _until_ready(client: Client, path: str, label: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    with progress.Progress(label) as shown:
        while time.monotonic() < deadline:
            status = client.get(path)["status"]
            shown.update(status["state"], status["reason"])
            if status["state"] == "READY":
                click.echo(f"{label} READY")
                return
            time.sleep(0.25)
    raise CliError(f"{label} is not READY after {timeout:.0f}s", exit_code=124)


@click.command(short_help="Delete resources by name, --all or --state.")
@click.argument("resource", shell_complete=complete_kinds)
@click.argument("names", nargs=-1, metavar="[NAME]...", shell_complete=complete_names)
@click.option("--all", "everything", is_flag=True, help="Every one of this kind (in the project).")
@click.option(
    "--state",
    "states",
    multiple=True,
    type=STATE,
    metavar="STATE",
    help=f"Every workload or service in this state ({STATE_LIST}); repeat for several.",
)
@click.option(
    "-y", "--yes", is_flag=True, help="Do not ask before deleting what --all or --state select."
)
@click.option("--wait", "wait_gone", is_flag=True, help="Then wait until they are gone.")
@click.pass_context
def delete(
    ctx: click.Context,
    resource: str,
    names: tuple[str, ...],
    everything: bool,
    states: tuple[str, ...],
    yes: bool,
    wait_gone: bool,
) -> int:
    """Delete workloads, services, pools, projects or bindings, or revoke tokens (by name
    or id).

    Several names at once, or --all, or (workloads, services) --state FAILED; what --all and
    --state select is listed and confirmed first (--yes skips the question; without a
    terminal it is required). Workloads, services, pools and projects are deleted in the
    background: 'deleting' is printed at once, --wait waits until they are gone.
    """
    kind = kind_named(resource)
    if states and not kind.states:
        raise click.UsageError("--state selects workloads and services only", ctx)
    states = states_of(kind, states)
    if bool(names) + everything + bool(states) != 1:
        raise click.UsageError("name what to delete: NAME..., --all or --state STATE", ctx)
    with client_for(ctx) as client:
        project = project_of(client) if kind.scoped else None
        if names:
            targets = list(names)
        else:
            targets = _selected(client, kind, project, states)
            if not targets:
                click.echo(f"No {kind.plural} to delete" + _in(project) + ".", err=True)
                return 0
            _confirm(kind, project, targets, yes)
        failed = 0
        for name in targets:
            try:
                _delete_one(ctx, client, kind, project, name, wait_gone)
            except ApiError as exc:
                if len(targets) == 1 or exc.status in (401, 403, 503):
                    raise
                click.echo(
                    f"error: {kind.name}/{printable(name)}: {printable(exc.message)}", err=True
                )
                failed += 1
    if failed:
        raise CliError(f"{failed} of {len(targets)} {kind.plural} were not deleted")
    return 0


def _in(project: str | None) -> str:
    return f" in project {project}" if project else ""


def _selected(
    client: Client, kind: Kind, project: str | None, states: tuple[str, ...]
) -> list[str]:
    """The names --all or --state select (tokens: the ones not revoked yet)."""
    found: list[str] = []
    for state in states or (None,):
        params = {"state": state} if state else {}
        for item in client.items(kind.path(project), **params):
            if kind.name == "token" and item.get("revoked_at"):
                continue
            if kind.name != "workload" and (item.get("status") or {}).get("state") == "DELETING":
                continue
            found.append(str(item["name"] if kind.name == "token" else item[kind.key]))
    return found


def _confirm(kind: Kind, project: str | None, targets: list[str], yes: bool) -> None:
    what = f"{len(targets)} {kind.name if len(targets) == 1 else kind.plural}{_in(project)}"
    if yes:
        return
    if not sys.stdin.isatty():
        raise CliError(f"not deleting {what} without confirmation: pass --yes")
    click.echo(f"These {what} will be deleted: " + ", ".join(map(printable, targets)), err=True)
    if not click.confirm("Delete them?", default=False, err=True):
        raise CliError("nothing deleted")


def _delete_one(
    ctx: click.Context, client: Client, kind: Kind, project: str | None, name: str, wait: bool
) -> None:
    label = f"{kind.name}/{printable(name)}"
    if kind.name == "token":
        client.request("DELETE", kind.path(project, _token_id(client, project, name)))
        click.echo(f"{label} revoked")
        return
    path = kind.path(project, name)
    client.request("DELETE", path)
    if kind.name == "binding":
        click.echo(f"{label} deleted")
        return
    click.echo(f"{label} deleting")
    if not wait:
        return
    if kind.name in ("workload", "service"):
        from aicp_cli.commands_read import wait as wait_command

        code = int(
            ctx.invoke(
                wait_command, first=kind.name, second=name, condition="delete", timeout="10m"
            )
        )
        if code:
            raise CliError(f"{label} is still there", exit_code=code)
        return
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if client.exists(path) is None:
            click.echo(f"{label} deleted")
            return
        time.sleep(0.25)
    raise CliError(f"{label} is still there after 10m", exit_code=124)


def _token_id(client: Client, project: str | None, name: str) -> str:
    """A token's id from its name or id (a name wins: names are unique in a project)."""
    tokens = client.items(by_name("token").path(project))
    for token in tokens:
        if token["name"] == name:
            return str(token["id"])
    if any(str(token["id"]) == name for token in tokens):
        return name
    raise CliError(
        f"token {name} does not exist in project {project} (no token of that name or id)"
    )


COMMANDS = [apply, run, create, delete]
