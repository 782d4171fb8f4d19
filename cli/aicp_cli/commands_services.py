"""`aicp scale`: a service's replica count, changed in place (`PATCH` of `replicas`).

The rest of what the command line does with services is where it does it for workloads:
`get` and `describe` (commands_read.py, service_views.py), `apply -f` with `kind: Service`
(manifests.py) and `delete` (commands_write.py).
"""

from __future__ import annotations

import click

from aicp_cli.arguments import complete_names, complete_services
from aicp_cli.errors import ApiError, CliError
from aicp_cli.kinds import kind_named
from aicp_cli.output import printable
from aicp_cli.session import client_for, project_of

#: The body's fields `aicp scale` fills, by the option that fills them (for its errors).
SCALE_OPTIONS = {"replicas": "--replicas"}


@click.command(short_help="Set how many replicas a service runs.")
@click.argument("resource", shell_complete=complete_services)
@click.argument("name", shell_complete=complete_names)
@click.option(
    "--replicas",
    type=click.IntRange(0),
    required=True,
    help="How many replicas to run (0 stops them all and keeps the service).",
)
@click.pass_context
def scale(ctx: click.Context, resource: str, name: str, replicas: int) -> None:
    """Set how many replicas a service runs: aicp scale service NAME --replicas N.

    The service gets a new generation with only its replica count changed (printed; the
    same count again changes nothing); the controller then starts or stops replicas. While
    the service autoscales, the autoscaler sets the count: this changes only its spec.
    """
    kind = kind_named(resource)
    if kind.name != "service":
        raise CliError(
            f"{kind.plural} do not scale; services do: aicp scale service NAME --replicas N"
        )
    with client_for(ctx) as client:
        path = kind.path(project_of(client), name)
        try:
            answer = client.request("PATCH", path, body={"replicas": replicas}).json()
        except ApiError as exc:
            raise exc.naming(SCALE_OPTIONS) from None
    said = (
        f"service/{printable(name)} scaled to {replicas} "
        f"replica{'' if replicas == 1 else 's'} (generation {answer.get('generation')})"
    )
    if (answer.get("spec") or {}).get("autoscaling"):
        said += "; it autoscales, so the autoscaler still sets the count"
    click.echo(said)


COMMANDS = [scale]
