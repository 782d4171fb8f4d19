"""Who reconciles a resource the API just created: this replica, or whoever the doorbell wakes.

docs/DESIGN.md §5: a NOTIFY-bearing commit takes a cluster-wide lock, so the replica that accepts a
create may instead lease the new resource inside the creating transaction and queue it locally
once that transaction has committed. `CreateLease` does that when the application state holds
the replica's `Reconciler` (key `"reconciler"`); without one (an API served alone) it rings the
doorbell as every other write does.

Order matters: `take()` runs inside the transaction, `committed()` only after it committed
(`respond()` calls it once `respond_once` has). A transaction that rolls back takes its lease
row with it, and `committed()` is never called; a lease that was taken but never reported is
freed by the reconciler's lease keeper.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.api.idempotency import Create, respond_once
from app.store.audit import ring_doorbell

if TYPE_CHECKING:
    import uuid

    from litestar import Request, Response
    from litestar.connection import ASGIConnection

    from app.api.auth import Caller
    from app.domain.kinds import Kind
    from app.reconcile.engine import NewLease, Reconciler
    from app.store.db import Connection, Database

STATE_KEY = "reconciler"


class CreateLease:
    """One create request's choice between leasing the new resource and ringing the doorbell."""

    def __init__(
        self, request: ASGIConnection[Any, Any, Any, Any], *, dry_run: bool = False
    ) -> None:
        self._reconciler: Reconciler | None = request.app.state.get(STATE_KEY)
        self._taken: NewLease | None = None
        self._dry_run = dry_run

    async def take(
        self, conn: Connection, kind: Kind, resource_id: uuid.UUID, project: uuid.UUID
    ) -> None:
        """Inside the creating transaction, after the insert: lease the resource to this
        replica, or ring the doorbell when there is no local reconciler or the lease is
        already held (then its holder must hear about the new row). `project` is the
        resource's: the reconciler serves projects in turn. A dry run (`app/api/dry_runs.py`)
        does neither: its transaction is rolled back."""
        if self._dry_run:
            return
        if self._reconciler is not None:
            self._taken = await self._reconciler.lease_new(conn, kind, resource_id, project)
            if self._taken is not None:
                return
        await ring_doorbell(conn, kind, resource_id)

    def committed(self) -> None:
        """After the commit: queue the leased resource on this replica's reconciler."""
        if self._reconciler is not None and self._taken is not None:
            self._reconciler.lease_committed(self._taken)
            self._taken = None

    async def respond(
        self, request: Request[Any, Any, Any], db: Database, caller: Caller, create: Create
    ) -> Response[bytes]:
        """The 202 of the create (`respond_once`, which runs `create` in its transaction),
        then, that transaction committed, `committed()`."""
        response = await respond_once(request, db, caller, status=202, create=create)
        self.committed()
        return response
