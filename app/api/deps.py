"""Handler dependencies, injected by name: ``caller: CallerDep`` and ``db: DbDep``.

The three are resolved one after the other: ``paging`` takes ``db`` and ``caller`` takes
``paging``, though neither uses what it takes. Litestar resolves dependencies that do not
depend on one another concurrently, in an anyio task group per request; for values already at
hand that group was ~5 % of a GET's CPU (docs/BENCHMARKS.md "Throughput at a fixed submission
rate"), and in sequence they cost a call each.
"""

from typing import Any, TypeAlias

from litestar.connection import ASGIConnection
from litestar.di import NamedDependency, Provide

from app.api.auth import Caller, caller_of
from app.api.paging import Paging, PagingDep
from app.store.db import Database

CallerDep: TypeAlias = NamedDependency[Caller]
"""The authenticated caller and the project in scope (set by the auth guard)."""

DbDep: TypeAlias = NamedDependency[Database]
"""The database; use ``db.transaction()`` for writes, ``db.connection()`` for reads."""


def provide_caller(request: ASGIConnection[Any, Any, Any, Any], paging: PagingDep) -> Caller:
    """Provider of ``caller``: the Caller the auth guard stored for this request (``paging``
    only orders it after the others: see the module's doc)."""
    del paging
    return caller_of(request)


def caller_provider() -> Provide:
    """Provider of ``caller``."""
    return Provide(provide_caller, sync_to_thread=False)


def paging_provider(paging: Paging) -> Provide:
    """Provider of ``paging``: the cursors of this application's lists (``db`` only orders it
    after ``db``)."""

    def provide_paging(db: DbDep) -> Paging:
        del db
        return paging

    return Provide(provide_paging, use_cache=True, sync_to_thread=False)


def database_provider(db: Database) -> Provide:
    """Provider of ``db``: the one Database of this application."""

    def provide_db() -> Database:
        return db

    return Provide(provide_db, use_cache=True, sync_to_thread=False)
