"""The kinds of resource aicp keeps, as the database, leases, events and tombstones name them.

`Kind` is a reconciled kind: one with a lease, a reconcile step and a tombstone. Events also
name the kinds of plain configuration too (`SubjectKind`). The database states the same sets as
CHECK constraints (`sql/migrations/0003_vocabulary.sql`).
"""

from __future__ import annotations

from typing import Final, Literal, get_args

Kind = Literal["project", "pool", "workload", "service"]
"""A reconciled kind: leased, reconciled by a step, finalized into a tombstone."""

SubjectKind = Literal["project", "pool", "workload", "service", "binding", "token", "role-binding"]
"""What an event row can be about."""

KINDS: Final[tuple[Kind, ...]] = get_args(Kind)
SUBJECT_KINDS: Final[tuple[SubjectKind, ...]] = get_args(SubjectKind)
