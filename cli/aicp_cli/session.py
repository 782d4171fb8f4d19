"""What every command needs: the resolved context and a client for it."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from aicp_cli import config
from aicp_cli.client import Client, require_project

if TYPE_CHECKING:
    from collections.abc import Iterator

    import click

    from aicp_cli.config import Context


def context_of(ctx: click.Context) -> Context:
    root = ctx.find_root().obj or {}
    return config.resolve(root.get("context"), root.get("project"))


@contextlib.contextmanager
def client_for(ctx: click.Context) -> Iterator[Client]:
    client = Client(context_of(ctx))
    try:
        yield client
    finally:
        client.close()


def project_of(client: Client) -> str:
    return require_project(client.context)
