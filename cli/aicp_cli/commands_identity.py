"""`aicp whoami`, `aicp logout` and `aicp role-bindings ...` (identity-provider groups → roles)."""

from __future__ import annotations

import json
from typing import Any

import click

from aicp_cli import config, oidc
from aicp_cli.commands_session import describe_roles
from aicp_cli.errors import CliError
from aicp_cli.output import table
from aicp_cli.session import client_for


@click.command(short_help="Who the current context signs in as, and its roles.")
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def whoami(ctx: click.Context, output: str) -> None:
    """Who the current context's token names: the platform admin, a project token, or a
    person (username, subject, groups, and the roles those groups give)."""
    with client_for(ctx) as client:
        me: dict[str, Any] = client.get("/whoami")
    if output == "json":
        click.echo(json.dumps(me, indent=2))
        return
    if me["kind"] == "admin":
        click.echo("the platform admin (admin token)")
        return
    if me["kind"] == "token":
        role = (me.get("roles") or [{}])[0]
        click.echo(f"a project token ({me['actor']}): {role.get('role')} in {role.get('project')}")
        return
    click.echo(f"{me['username']} (subject {me['subject']}, issuer {me['issuer']})")
    click.echo(f"groups: {', '.join(me.get('groups') or []) or 'none'}")
    click.echo(f"roles:  {describe_roles(me)}")
    for grant in me.get("roles") or []:
        click.echo(f"  {grant['role']} in {grant['project']} (from {', '.join(grant['groups'])})")
    if me.get("admin_groups"):
        click.echo(f"  platform admin (from {', '.join(me['admin_groups'])})")
    if me.get("expires_at"):
        click.echo(f"access token expires at {me['expires_at']} (renewed automatically)")


@click.command(short_help="Sign out: forget the context's token (revoking a sign-in).")
@click.option("--context", "name", metavar="NAME", help="This context (default: the current).")
def logout(name: str | None) -> None:
    """Forget the context's token; a person's refresh token is revoked at the identity
    provider first (when it offers revocation). The context keeps its URL and project."""
    data = config.load()
    chosen = name or data.get("current-context")
    entry = data["contexts"].get(chosen) if chosen else None
    if not isinstance(entry, dict):
        raise CliError("no such context to log out of" if name else "not logged in")
    renewal = entry.get("oidc")
    revoked = oidc.revoke(renewal) if isinstance(renewal, dict) else False
    config.store_tokens(str(chosen), "", None)
    said = " (sign-in revoked at the identity provider)" if revoked else ""
    click.echo(f"Logged out of context {chosen!r}{said}.")


@click.group("role-bindings", short_help="Map identity-provider groups to roles (admin).")
def role_bindings() -> None:
    """Role bindings: the members of a group get platform-admin, or a role in one project."""


@role_bindings.command("list", short_help="List role bindings.")
@click.option("--project", "only", metavar="NAME", help="Only this project's bindings.")
@click.pass_context
def list_bindings(ctx: click.Context, only: str | None) -> None:
    """List role bindings."""
    with client_for(ctx) as client:
        items = client.items("/role-bindings", project=only)
    table(
        items,
        [
            ("ID", lambda r: r["id"]),
            ("GROUP", lambda r: r["group"]),
            ("ROLE", lambda r: r["role"]),
            ("PROJECT", lambda r: r.get("project")),
            ("CREATED BY", lambda r: r["created_by"]),
        ],
    )


@role_bindings.command("create", short_help="Give a group a role.")
@click.argument("group")
@click.argument("role", type=click.Choice(["platform-admin", "admin", "editor", "viewer"]))
@click.option("--in", "project", metavar="PROJECT", help="The project (not for platform-admin).")
@click.pass_context
def create_binding(ctx: click.Context, group: str, role: str, project: str | None) -> None:
    """Give the members of GROUP the ROLE (in PROJECT: aicp role-bindings create
    vision-team editor --in vision)."""
    body: dict[str, Any] = {"group": group, "role": role}
    if project:
        body["project"] = project
    with client_for(ctx) as client:
        made = client.request("POST", "/role-bindings", body=body).json()
    where = f" in {made['project']}" if made.get("project") else ""
    click.echo(f"role binding {made['id']}: group {group!r} is {role}{where}")


@role_bindings.command("delete", short_help="Delete a role binding.")
@click.argument("binding_id")
@click.pass_context
def delete_binding(ctx: click.Context, binding_id: str) -> None:
    """Delete a role binding (its group's members lose the role at their next request)."""
    with client_for(ctx) as client:
        client.request("DELETE", f"/role-bindings/{binding_id}")
    click.echo(f"role binding {binding_id} deleted")


COMMANDS = [whoami, logout, role_bindings]
