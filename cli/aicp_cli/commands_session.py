"""`aicp login`, `aicp config ...` (contexts) and `aicp completion SHELL`."""

from __future__ import annotations

from typing import Any

import click
from click.shell_completion import get_completion_class

from aicp_cli import config, oidc
from aicp_cli.client import API, Client, problem_of
from aicp_cli.config import Context
from aicp_cli.errors import CliError
from aicp_cli.output import table


@click.command(short_help="Sign in (API token or single sign-on) and save the context.")
@click.option("--url", required=True, help="Where aicp answers, e.g. http://127.0.0.1:8080")
@click.option(
    "--token",
    envvar="AICP_TOKEN",
    help="The platform admin token or a project token (aicp_...); or AICP_TOKEN.",
)
@click.option(
    "--oidc",
    "oidc_login",
    is_flag=True,
    help="Sign in as a person through the server's identity provider (device code by default).",
)
@click.option(
    "--browser",
    is_flag=True,
    help="With --oidc: sign in in a browser (authorization code + PKCE on a loopback port).",
)
@click.option(
    "--no-open", is_flag=True, help="With --browser: print the URL instead of opening it."
)
@click.option(
    "--client-id", metavar="ID", help="With --oidc: the OAuth client (default: the server's)."
)
@click.option(
    "--scope",
    default="openid",
    show_default=True,
    help="With --oidc: the scopes to ask for (Dex: 'openid groups offline_access').",
)
@click.option("--context", "name", metavar="NAME", help="Save as this context (default: derived).")
@click.option(
    "--project", metavar="NAME", help="Default project (a project token's own if omitted)."
)
def login(
    url: str,
    token: str | None,
    oidc_login: bool = False,
    browser: bool = False,
    no_open: bool = False,
    client_id: str | None = None,
    scope: str = "openid",
    name: str | None = None,
    project: str | None = None,
) -> None:
    """Check a token against a server and save it as the current context; or, with --oidc,
    sign in as a person (device authorization: a URL and a code to approve; --browser:
    authorization code with PKCE) and keep the refresh token to renew the sign-in."""
    url = url.rstrip("/")
    if oidc_login:
        provider = oidc.provider_of(url, client_id, scope)
        _login_person(url, provider, browser, not no_open, name, project)
        return
    if not token:
        raise CliError("give --token TOKEN (or AICP_TOKEN), or sign in as a person with --oidc")
    client = Client(Context("login", url, token, project))
    try:
        projects = _projects_at(client, url)
    finally:
        client.close()
    is_project_token = token.startswith("aicp_")
    if project is None and is_project_token and len(projects) == 1:
        project = projects[0]["name"]
    context_name = name or project or ("admin" if not is_project_token else "default")
    path = config.store_context(Context(context_name, url, token, project))
    who = f"project {project}" if is_project_token else "the platform admin"
    click.echo(f"Logged in to {url} as {who}; context {context_name!r} saved in {path}.")


def _login_person(
    url: str,
    provider: oidc.Provider,
    browser: bool,
    open_browser: bool,
    name: str | None,
    project: str | None,
) -> None:
    if browser:
        entry = oidc.browser_login(provider, open_browser=open_browser)
    else:
        entry = oidc.device_login(provider)
    access = entry.pop("access_token")
    client = Client(Context("login", url, access, project))
    try:
        me = client.get("/whoami")
    finally:
        client.close()
    roles = me.get("roles") or []
    if project is None and len(roles) == 1:
        project = roles[0]["project"]
    username = me.get("username") or "you"
    context_name = name or f"{username}@sso"
    path = config.store_context(Context(context_name, url, access, project, entry))
    gives = describe_roles(me)
    click.echo(
        f"Logged in to {url} as {username} (groups: {', '.join(me.get('groups') or []) or 'none'}"
        f"; {gives}); context {context_name!r} saved in {path}."
    )


def describe_roles(me: dict[str, Any]) -> str:
    """What a /whoami answer's roles amount to, in a few words."""
    parts = ["platform admin"] if me.get("platform_admin") else []
    parts += [f"{r['role']} in {r['project']}" for r in me.get("roles") or []]
    return ", ".join(parts) or "no role: no role binding matches these groups"


def _projects_at(client: Client, url: str) -> list[dict[str, Any]]:
    """The first projects the token sees; an answer that is not aicp's says so."""
    response = client.request("GET", "/projects", params={"limit": 2}, allow=tuple(range(400, 600)))
    try:
        body = response.json()
    except ValueError:
        body = None
    if (
        response.status_code < 400
        and isinstance(body, dict)
        and isinstance(body.get("items"), list)
    ):
        return list(body["items"])
    if isinstance(body, dict) and str(body.get("type", "")).startswith("https://aicp.dev/"):
        raise problem_of(response)
    kind = response.headers.get("content-type", "no content type").split(";")[0]
    raise CliError(
        f"{url} is not an aicp API: GET {API}/projects answered HTTP {response.status_code} "
        f"({kind}); pass the URL aicp answers at, e.g. http://127.0.0.1:8080"
    )


@click.group("config", short_help="List, switch and forget saved contexts.")
def config_group() -> None:
    """Saved contexts (like kubectl config)."""


@config_group.command("get-contexts", short_help="List the saved contexts.")
def get_contexts() -> None:
    """List the saved contexts; * marks the current one."""
    data = config.load()
    current = data.get("current-context")
    rows = [
        {"current": "*" if name == current else "", "name": name, **entry}
        for name, entry in sorted(data["contexts"].items())
    ]
    table(
        rows,
        [
            ("CURRENT", lambda r: r["current"]),
            ("NAME", lambda r: r["name"]),
            ("URL", lambda r: r.get("url")),
            ("PROJECT", lambda r: r.get("project")),
        ],
    )


@config_group.command("current-context")
def current_context() -> None:
    """Print the current context's name."""
    name = config.load().get("current-context")
    if not name:
        raise CliError("no current context: run 'aicp login'")
    click.echo(name)


@config_group.command("use-context")
@click.argument("name")
def use_context(name: str) -> None:
    """Make NAME the current context."""
    config.use(name)
    click.echo(f"Switched to context {name!r}.")


@config_group.command("delete-context")
@click.argument("name")
def delete_context(name: str) -> None:
    """Forget a saved context (and its token)."""
    config.forget(name)
    click.echo(f"Deleted context {name!r}.")


@click.command(short_help="Print the shell completion script.")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the shell completion script, e.g. `eval "$(aicp completion bash)"`, or save it:
    `aicp completion fish > ~/.config/fish/completions/aicp.fish`."""
    root = ctx.find_root()
    cls = get_completion_class(shell)
    if cls is None:  # click ships all three
        raise CliError(f"no completion for {shell}")
    click.echo(cls(root.command, {}, "aicp", "_AICP_COMPLETE").source())


COMMANDS = [login, config_group, completion]
