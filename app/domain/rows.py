"""The shape of a stored row as the domain reads it, without depending on the database driver."""

from __future__ import annotations

from typing import Any, Protocol


class Row(Protocol):
    """A row by column name (an `asyncpg.Record`, or a dict in tests)."""

    def __getitem__(self, key: str, /) -> Any: ...
