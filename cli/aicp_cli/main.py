"""`aicp`: the command line of the AI compute control plane.

Built on click (commands, options, shell completion), rich (tables, progress) and httpx with
httpx-sse (the REST API and its event streams); it speaks only the public REST API. Commands
follow kubectl's habits: `get`, `describe`, `apply -f`, `delete`, `scale`, `logs -f`,
`wait --for`, contexts in a config file.

Errors never show a traceback: `error: <what>` on standard error and exit status 1 (2 for a
usage error, 124 when `wait` times out, 130 when interrupted).
"""

from __future__ import annotations

import sys

import click

from aicp_cli import (
    commands_identity,
    commands_read,
    commands_services,
    commands_session,
    commands_write,
)
from aicp_cli.errors import CliError
from aicp_cli.output import printable

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

#: The global options that take a value, as they may also be typed after the subcommand.
GLOBAL_VALUED = ("-p", "--project", "--context")
#: Commands with options of these names of their own.
OWN_GLOBALS = ("login",)


def hoist_globals(args: list[str]) -> list[str]:
    """`args` with the global options typed after the subcommand moved before it, as kubectl
    users type them (`aicp apply -f x -p research`). Nothing after `--` is touched (the
    container command of `aicp run`), nor the options of `login`, which has its own."""
    index, front = 0, []
    while index < len(args) and args[index].startswith("-"):
        step = 2 if args[index] in GLOBAL_VALUED else 1
        front.extend(args[index : index + step])
        index += step
    if index >= len(args) or args[index] in OWN_GLOBALS:
        return args
    rest, hoisted = [], []
    words = args[index:]
    position = 0
    while position < len(words):
        word = words[position]
        if word == "--":
            rest.extend(words[position:])
            break
        name = word.split("=", 1)[0]
        if name in GLOBAL_VALUED and "=" in word:
            hoisted.append(word)
        elif word in GLOBAL_VALUED and position + 1 < len(words):
            hoisted.extend(words[position : position + 2])
            position += 1
        elif word.startswith("-p") and len(word) > 2 and not word.startswith("--"):
            hoisted.append(word)
        else:
            rest.append(word)
        position += 1
    return [*front, *hoisted, *rest]


class Root(click.Group):
    """The `aicp` group: global options are accepted before or after the subcommand."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_globals(args))


@click.group(
    cls=Root,
    context_settings=CONTEXT_SETTINGS,
    short_help="Run GPU workloads and inference services on aicp and follow them.",
)
@click.option(
    "--context",
    "context_name",
    metavar="NAME",
    help="Use this saved context (before or after the command).",
)
@click.option(
    "-p",
    "--project",
    metavar="NAME",
    help="The project (default: the context's, or AICP_PROJECT); before or after the command.",
)
@click.version_option(package_name="aicp", prog_name="aicp")
@click.pass_context
def cli(ctx: click.Context, context_name: str | None, project: str | None) -> None:
    """Submit GPU workloads to aicp, watch them run, read their logs and evidence; run
    inference services (`kind: Service` in `aicp apply`) and scale them.

    Log in once with `aicp login --url URL --token TOKEN`, or as a person with
    `aicp login --url URL --oidc`; AICP_URL and AICP_TOKEN override the saved context.
    """
    ctx.obj = {"context": context_name, "project": project}


for module in (
    commands_session,
    commands_identity,
    commands_read,
    commands_write,
    commands_services,
):
    for command in module.COMMANDS:
        cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    """The console script: run a command; turn every failure into one line."""
    try:
        result = cli.main(args=argv, prog_name="aicp", standalone_mode=False)
    except CliError as exc:
        click.echo(f"error: {printable(exc.message)}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:  # never a traceback: say what broke, in one line
        click.echo(f"error: unexpected {type(exc).__name__}: {printable(exc)}", err=True)
        sys.exit(1)
    sys.exit(result if isinstance(result, int) else 0)
