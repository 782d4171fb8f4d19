"""Throwaway databases for the benchmarks, on the server of any PostgreSQL URL.

A URL names its database in its path, whatever follows it: `postgresql://u:p@host:5432/db`, or an
embedded server's `postgresql://postgres@/db?host=/tmp/x` (a socket directory in the query).
`urllib.parse` splits it; cutting at the last "/" would cut inside the query of the second.
"""

from __future__ import annotations

import contextlib
import secrets
import urllib.parse
from collections.abc import AsyncIterator

import asyncpg


def with_database(url: str, database: str) -> str:
    """`url` pointing at `database` on the same server (user, host, port and query kept)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + database))


def database_of(url: str) -> str:
    """The database `url` names ("" when it names none)."""
    return urllib.parse.urlsplit(url).path.lstrip("/")


@contextlib.asynccontextmanager
async def scratch_database(admin_url: str, prefix: str) -> AsyncIterator[str]:
    """A fresh, empty database `<prefix>_<random>` on `admin_url`'s server; yields its URL and
    drops it afterwards (with any session still connected)."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(admin_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield with_database(admin_url, name)
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()
