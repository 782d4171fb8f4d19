"""Handler dependencies, injected by name: ``caller: CallerDep`` and ``db: DbDep``."""

from typing import Any, TypeAlias

from litestar.connection import ASGIConnection
from litestar.di import NamedDependency, Provide

from app.api.auth import Caller, caller_of
from app.api.paging import Paging
from app.store.db import Database

CallerDep: TypeAlias = NamedDependency[Caller]
"""The authenticated caller and the project in scope (set by the auth guard)."""

DbDep: TypeAlias = NamedDependency[Database]
"""The database; use ``db.transaction()`` for writes, ``db.connection()`` for reads."""


async def provide_caller(request: ASGIConnection[Any, Any, Any, Any]) -> Caller:
    """Provider of ``caller``: the Caller the auth guard stored for this request."""
    return caller_of(request)


def paging_provider(paging: Paging) -> Provide:
    """Provider of ``paging``: the cursors of this application's lists."""

    def provide_paging() -> Paging:
        return paging

    return Provide(provide_paging, use_cache=True, sync_to_thread=False)


def database_provider(db: Database) -> Provide:
    """Provider of ``db``: the one Database of this application."""

    def provide_db() -> Database:
        return db

    return Provide(provide_db, use_cache=True, sync_to_thread=False)
