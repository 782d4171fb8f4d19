"""What every command needs: the resolved context and a client for it."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING

from aicp_cli import config, oidc
from aicp_cli.client import Client, require_project

if TYPE_CHECKING:
    from collections.abc import Iterator

    import click

    from aicp_cli.config import Context


def context_of(ctx: click.Context) -> Context:
    """The resolved context; a signed-in person's access token renewed first when it is
    about to expire (and the renewal saved)."""
    root = ctx.find_root().obj or {}
    context = config.resolve(root.get("context"), root.get("project"))
    if context.oidc is None:
        return context
    renewed = oidc.fresh(context.oidc)
    if renewed is None:
        return context
    token = renewed.pop("access_token")
    config.store_tokens(context.name, token, renewed)
    return dataclasses.replace(context, token=token, oidc=renewed)


@contextlib.contextmanager
def client_for(ctx: click.Context) -> Iterator[Client]:
    client = Client(context_of(ctx))
    try:
        yield client
    finally:
        client.close()


def project_of(client: Client) -> str:
    return require_project(client.context)
