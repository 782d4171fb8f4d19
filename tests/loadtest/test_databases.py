"""The benchmarks' scratch databases live on the server of whatever URL they are given,
including an embedded server's, whose socket directory is in the query."""

from __future__ import annotations

import urllib.parse

from hypothesis import given
from hypothesis import strategies as st

from loadtest.databases import database_of, with_database

NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,30}", fullmatch=True)


def test_an_embedded_server_url_keeps_its_socket_directory() -> None:
    url = "postgresql://postgres:@/postgres?host=/tmp/aicp-pg-x/pg"
    assert with_database(url, "scratch_1") == (
        "postgresql://postgres:@/scratch_1?host=/tmp/aicp-pg-x/pg"
    )


def test_a_tcp_url_keeps_user_host_and_port() -> None:
    url = "postgresql://postgres:postgres@127.0.0.1:5432/postgres"
    assert with_database(url, "b") == "postgresql://postgres:postgres@127.0.0.1:5432/b"


def test_a_url_without_a_database_gets_one() -> None:
    assert with_database("postgresql://u@h:1", "d") == "postgresql://u@h:1/d"


@given(
    user=NAMES,
    host=st.sampled_from(["127.0.0.1:5432", "db.internal", ""]),
    database=NAMES,
    query=st.sampled_from(["", "host=/tmp/a/b", "sslmode=disable&host=/run/pg"]),
    target=NAMES,
)
def test_only_the_database_changes(
    user: str, host: str, database: str, query: str, target: str
) -> None:
    url = f"postgresql://{user}@{host}/{database}" + (f"?{query}" if query else "")
    moved = with_database(url, target)
    before, after = urllib.parse.urlsplit(url), urllib.parse.urlsplit(moved)
    assert database_of(moved) == target
    assert (after.scheme, after.netloc, after.query) == (before.scheme, before.netloc, before.query)
