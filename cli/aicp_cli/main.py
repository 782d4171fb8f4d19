"""`aicp`: the command line of the AI compute control plane.

Built on click (commands, options, shell completion), rich (tables, progress) and httpx with
httpx-sse (the REST API and its event streams); it speaks only the public REST API. Commands
follow kubectl's habits: `get`, `describe`, `apply -f`, `delete`, `logs -f`, `wait --for`,
contexts in a config file.

Errors never show a traceback: `error: <what>` on standard error and exit status 1 (2 for a
usage error, 124 when `wait` times out, 130 when interrupted).
"""

from __future__ import annotations

import sys

import click

from aicp_cli import commands_read, commands_session, commands_write
from aicp_cli.errors import CliError
from aicp_cli.output import printable

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT_SETTINGS)
@click.option("--context", "context_name", metavar="NAME", help="Use this saved context.")
@click.option(
    "-p",
    "--project",
    metavar="NAME",
    help="The project (default: the context's, or AICP_PROJECT).",
)
@click.version_option(package_name="aicp", prog_name="aicp")
@click.pass_context
def cli(ctx: click.Context, context_name: str | None, project: str | None) -> None:
    """Submit GPU workloads to aicp, watch them run, read their logs and evidence.

    Log in once with `aicp login --url URL --token TOKEN`; AICP_URL and AICP_TOKEN
    override the saved context.
    """
    ctx.obj = {"context": context_name, "project": project}


for module in (commands_session, commands_read, commands_write):
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
