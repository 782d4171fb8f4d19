"""Every SQL statement aicp runs, loaded once by name from ``sql/queries.sql``.

The file is a list of ``-- name: <query_name>`` headers, each followed by one statement.
Comment lines before a header (section banners, descriptions) belong to no query. Code uses
``QUERIES[<query_name>]``; a unit test checks that every name used in ``app/`` exists.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import LiteralString

QUERIES_PATH = Path(__file__).resolve().parents[2] / "sql" / "queries.sql"

_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\b.*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, LiteralString]:
    """Split a queries file into ``{name: statement}``; duplicate names are an error."""
    found: dict[str, LiteralString] = {}
    headers = list(_HEADER.finditer(text))
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        lines = text[header.end() : end].strip().splitlines()
        # Drop trailing comment lines: they are the next section's banner, not this query.
        while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith("--")):
            lines.pop()
        statement = "\n".join(lines).strip().rstrip(";").strip()
        name = header.group(1)
        if name in found:
            raise ValueError(f"query {name!r} is defined twice in queries.sql")
        if not statement:
            raise ValueError(f"query {name!r} has no statement")
        # The file is part of the source tree, never user input: it is literal SQL.
        found[name] = statement
    return found


QUERIES: dict[str, LiteralString] = parse_queries(QUERIES_PATH.read_text(encoding="utf-8"))
