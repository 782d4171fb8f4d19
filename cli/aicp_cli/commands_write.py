"""`aicp apply`, `aicp run`, `aicp create ...` and `aicp delete ...`."""

from __future__ import annotations

import secrets
import time

import click

from aicp_cli import manifests, progress
from aicp_cli.commands_read import complete_kinds, complete_workloads
from aicp_cli.errors import ApiError, CliError, Unreachable
from aicp_cli.kinds import kind_named
from aicp_cli.output import printable
from aicp_cli.session import client_for, project_of


@click.command()
@click.option(
    "-f",
    "--filename",
    "files",
    multiple=True,
    required=True,
    type=click.Path(allow_dash=True),
    help="YAML or JSON file (several documents allowed); - for standard input.",
)
@click.option("--dry-run", is_flag=True, help="Print what would change; change nothing.")
@click.pass_context
def apply(ctx: click.Context, files: tuple[str, ...], dry_run: bool) -> None:
    """Create or replace resources from files: workloads (the default kind), compute pools
    (kind: ComputePool), projects and accelerator bindings. A workload whose spec differs is
    replaced by a new generation; an identical one is left alone."""
    documents = manifests.read_documents(list(files))
    failed = 0
    with client_for(ctx) as client:
        project = client.context.project
        for doc in documents:
            label = f"{doc.kind.lower()}/{doc.name}"
            try:
                step = manifests.plan(client, project, doc)
                if not dry_run:
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


@click.command(cls=AfterDashes)
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
    "--env", "env", multiple=True, metavar="KEY=VALUE", help="An environment variable (repeat)."
)
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="A label (repeat).")
@click.option("--max-runtime", "max_runtime", type=int, help="Seconds before it is stopped.")
@click.option("--retries", type=int, help="Retries of a failed pod.")
@click.option("--priority", type=click.Choice(["low", "normal", "high"]))
@click.option("-w", "--wait", "wait_for", is_flag=True, help="Then wait until it has finished.")
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
    env: tuple[str, ...],
    labels: tuple[str, ...],
    max_runtime: int | None,
    retries: int | None,
    priority: str | None,
    wait_for: bool,
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
    if command:
        body["command"], body["args"] = [command[0]], list(command[1:])
    for key, value in (
        ("max_runtime_seconds", max_runtime),
        ("retries", retries),
        ("priority", priority),
    ):
        if value is not None:
            body[key] = value
    with client_for(ctx) as client:
        path = f"/projects/{project_of(client)}/workloads"
        created = client.request("POST", path, body=body).json()
        click.echo(f"workload/{printable(created['name'])} created")
        if not wait_for:
            return 0
    from aicp_cli.commands_read import wait

    return int(ctx.invoke(wait, name=created["name"], condition="state=SUCCEEDED", timeout="24h"))


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
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint=option)
        found[key] = value
    return found


@click.group()
def create() -> None:
    """Create a token, a compute pool, a project or an accelerator binding."""


@create.command("token")
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
        made = client.request("POST", f"/projects/{project_of(client)}/tokens", body=body).json()
    said = f"token/{made['name']} created (id {made['id']}, role {made['role']})"
    click.echo(printable(said), err=True)
    click.echo(made["token"])


@create.command("pool")
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
        path = f"/projects/{project_of(client)}/compute-pools"
        client.request("POST", path, body=body)
        click.echo(f"pool/{name} created")
        if wait_ready:
            _until_ready(client, f"{path}/{name}", f"pool/{name}")


@create.command("project")
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
            _until_ready(client, f"/projects/{name}", f"project/{name}")


@create.command("binding")
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
        answer = client.request("PUT", f"/accelerator-bindings/{accelerator_class}", body=body)
    click.echo(
        f"binding/{accelerator_class} {'created' if answer.status_code == 201 else 'replaced'}"
    )


def _until_ready(client: object, path: str, label: str, timeout: float = 120.0) -> None:
    from aicp_cli.client import Client

    assert isinstance(client, Client)
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


@click.command()
@click.argument("resource", shell_complete=complete_kinds)
@click.argument("name", shell_complete=complete_workloads)
@click.option("--wait", "wait_gone", is_flag=True, help="Then wait until it is gone.")
@click.pass_context
def delete(ctx: click.Context, resource: str, name: str, wait_gone: bool) -> int:
    """Delete a workload, pool, project or binding, or revoke a token (by its id)."""
    kind = kind_named(resource)
    with client_for(ctx) as client:
        project = project_of(client) if kind.scoped else None
        path = kind.path(project, name)
        client.request("DELETE", path)
        verb = "revoked" if kind.name == "token" else "deleted"
        click.echo(f"{kind.name}/{name} {verb if not wait_gone else 'deleting'}")
        if not wait_gone or kind.name in ("token", "binding"):
            return 0
        if kind.name == "workload":
            from aicp_cli.commands_read import wait

            return int(ctx.invoke(wait, name=name, condition="delete", timeout="10m"))
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                client.get(path)
            except ApiError as exc:
                if exc.status == 404:
                    click.echo(f"{kind.name}/{name} deleted")
                    return 0
                raise
            time.sleep(0.25)
    raise CliError(f"{kind.name}/{name} is still there after 10m", exit_code=124)


COMMANDS = [apply, run, create, delete]
