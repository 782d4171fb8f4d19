"""Every query the code asks for by name exists in sql/queries.sql, exactly once, and every
query there is asked for."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app.store.queries import QUERIES, parse_queries

APP = Path(__file__).resolve().parents[2] / "app"


def query_names_used(source: str) -> set[str]:
    """Names in ``QUERIES["name"]`` subscripts of real code (docstrings do not count)."""
    return {
        node.slice.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "QUERIES"
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    }


def test_every_query_name_used_in_the_code_is_defined() -> None:
    used = {
        (path.relative_to(APP.parent).as_posix(), name)
        for path in APP.rglob("*.py")
        for name in query_names_used(path.read_text(encoding="utf-8"))
    }
    assert used, "no query uses found: the pattern is stale"
    missing = sorted(f"{where}: {name}" for where, name in used if name not in QUERIES)
    assert missing == []


def test_every_query_defined_is_used_by_the_code() -> None:
    used = {name for path in APP.rglob("*.py") for name in query_names_used(path.read_text())}

    assert sorted(set(QUERIES) - used) == []


def test_a_query_file_splits_into_named_statements_without_banners() -> None:
    text = (
        "-- ===== section: a =====\n"
        "-- name: first\n-- what it does\nSELECT 1;\n\n"
        "-- ===== section: b =====\n\n"
        "-- name: second\nSELECT\n  2\n"
    )
    assert parse_queries(text) == {"first": "-- what it does\nSELECT 1", "second": "SELECT\n  2"}


def test_a_query_name_defined_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match="twice"):
        parse_queries("-- name: q\nSELECT 1;\n-- name: q\nSELECT 2;\n")


def test_no_statement_in_the_file_is_empty() -> None:
    assert all(statement.strip() for statement in QUERIES.values())
