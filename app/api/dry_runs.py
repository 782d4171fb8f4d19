"""`?dry_run=true` on every create and replace: the whole request, then a rollback.

A dry run runs the same checks in the same order as the real request — validation, defaults,
roles and ownership, project limits and pool capacity, `If-Match`, the cluster objects a
create would take — inside a transaction that is rolled back instead of committed. So nothing
it did is kept: no row, no event, no lease, no idempotency record, and no NOTIFY (PostgreSQL
delivers those only on commit), hence no doorbell and no change-feed entry. It counts against
the rate limits as the request it stands for.

The answer is 200 with the object as the request would have stored it (defaults applied),
the status the real request would answer, and the fields it would change
(`app/domain/dry_runs.py`). Errors are the real request's problems. `Idempotency-Key` is
checked as on a real create, then neither replayed nor recorded.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from litestar import Request, Response
from litestar.params import QueryParameter

from app.api.idempotency import checked_key
from app.domain.dry_runs import WRITTEN_FIELDS, changes_between
from app.domain.errors import NotFound

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable

    from app.api.idempotency import Create, Created
    from app.store.db import Connection, Database

DryRun = Annotated[
    bool,
    QueryParameter(
        name="dry_run",
        description="`true`: check everything and answer 200 with what the request would "
        "store and change (`changes`), writing nothing",
    ),
]
"""The `dry_run` query flag of creates and replaces."""

T = TypeVar("T")


class _RollBack(Exception):
    """Raised at the end of a dry run's transaction so that it is rolled back."""


@contextlib.asynccontextmanager
async def transaction(db: Database, *, dry_run: bool) -> AsyncIterator[Connection]:
    """`db.transaction()`; for a dry run, rolled back when the block ends instead of
    committed."""
    if not dry_run:
        async with db.transaction() as conn:
            yield conn
        return
    try:
        async with db.transaction() as conn:
            yield conn
            raise _RollBack
    except _RollBack:
        pass


async def create_dry(request: Request[Any, Any, Any], db: Database, create: Create) -> Created:
    """What `respond_once` would create for this request, rolled back."""
    checked_key(request)
    async with transaction(db, dry_run=True) as conn:
        return await create(conn)


async def stored(read: Awaitable[T]) -> T | None:
    """What is stored before a dry-run replace, or None when nothing is: the write itself then
    answers the real request's problem (404, say)."""
    try:
        return await read
    except NotFound:
        return None


def answer(envelope: type, resource: Any, before: Any, status: int, **extra: Any) -> Response[Any]:
    """The 200 answer of a dry run: `resource` as it would be stored, `before` what is
    (`extra`: the envelope's other fields, a workload's `admission`)."""
    changes = changes_between(before, resource, WRITTEN_FIELDS[envelope])
    return Response(
        envelope(status_code=status, object=resource, changes=changes, **extra), status_code=200
    )
