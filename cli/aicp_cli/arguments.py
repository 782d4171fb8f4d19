"""What the commands' arguments take: resource kinds and names (completed by the shell from
the server) and states (a workload's or a service's, checked against the kind's)."""

from __future__ import annotations

from typing import Any

import click
from click.shell_completion import CompletionItem

from aicp_cli.client import Client
from aicp_cli.errors import CliError
from aicp_cli.kinds import KINDS, NAMES, Kind, by_name, kind_named
from aicp_cli.session import context_of, project_of

#: A workload's or a service's state as an option's value: any casing typed, upper case as
#: the server has it (`states_of` checks it is one of the kind's).
STATE = click.Choice(
    list(dict.fromkeys(state for kind in KINDS for state in kind.states)), case_sensitive=False
)
STATE_LIST = "; ".join(f"{kind.plural}: {', '.join(kind.states)}" for kind in KINDS if kind.states)


def states_of(kind: Kind, states: tuple[str, ...]) -> tuple[str, ...]:
    """`states` as the server spells them; a usage error naming `--state` when one is not a
    state of `kind` (READY is a service's, QUEUED a workload's)."""
    for state in states:
        if state.upper() not in kind.states:
            raise click.BadParameter(
                f"{state!r} is not a {kind.name} state (one of {', '.join(kind.states)})",
                param_hint="'--state'",
            )
    return tuple(state.upper() for state in states)


def _names(ctx: click.Context, kind: Kind, incomplete: str) -> list[CompletionItem]:
    """The names of `kind` for the shell (quietly nothing when the server cannot be asked)."""
    try:
        client = Client(context_of(ctx), timeout=2.0)
        try:
            found = client.items(kind.path(project_of(client) if kind.scoped else None))
        finally:
            client.close()
    except Exception:
        return []
    names = (str(item.get("name") or item.get(kind.key)) for item in found)
    return [CompletionItem(name) for name in names if name.startswith(incomplete)]


def complete_workloads(ctx: click.Context, _param: Any, incomplete: str) -> list[CompletionItem]:
    """Workload names for the shell."""
    return _names(ctx, by_name("workload"), incomplete)


def complete_names(ctx: click.Context, _param: Any, incomplete: str) -> list[CompletionItem]:
    """Names of the kind typed before them (`aicp get svc <TAB>`: services) for the shell."""
    try:
        kind = kind_named(str(ctx.params.get("resource") or "workload"))
    except CliError:
        return []
    return _names(ctx, kind, incomplete)


def complete_kinds(_ctx: click.Context, _param: Any, incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(name) for name in NAMES if name.startswith(incomplete)]


def complete_services(_ctx: click.Context, _param: Any, incomplete: str) -> list[CompletionItem]:
    """The service kind's names (`aicp scale` scales nothing else)."""
    aliases = by_name("service").aliases
    return [CompletionItem(name) for name in aliases if name.startswith(incomplete)]
