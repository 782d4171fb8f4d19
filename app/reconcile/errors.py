"""What a reconcile step can raise to tell the engine how to treat its key.

    ReconcileError        base of the engine's own signals (never retried as-is)
    ├── LeaseLost         a fenced write touched 0 rows: ownership moved; drop the key at once
    └── TerminalError     the step cannot succeed by retrying; record it, do not retry

Any other exception is a transient failure: the key is retried with exponential backoff.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.store.leases import ResourceKey


class ReconcileError(Exception):
    """A reconcile step ended with a signal for the engine."""


class LeaseLost(ReconcileError):
    """This replica no longer holds the lease; another replica owns the resource now."""

    def __init__(self, key: ResourceKey, detail: str = "") -> None:
        self.key = key
        message = f"lease of {key} lost"
        super().__init__(f"{message}: {detail}" if detail else message)


class TerminalError(ReconcileError):
    """Retrying will not help (for example, a manifest the cluster rejects as invalid)."""
