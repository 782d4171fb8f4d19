"""What a live stream follows: workloads or services. Both kinds share the change log, its
numbers and the feed (`app.streams.changefeed`); a subscription names its kind, and this is
what differs between them — how the log and a sentence name it, and how a row of it is shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from app.domain.service_resources import service_from_row
from app.domain.workload_resources import workload_from_row

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.domain.rows import Row
    from app.store.changes import ChangeKind


@dataclass(frozen=True, slots=True)
class StreamKind:
    """One kind of resource the streams follow."""

    name: ChangeKind  # as the change log's `kind` column says it
    title: str  # as a sentence starts with it: "Workload 'x' not found."
    render: Callable[[Row, str], Any]  # a row (current or of the log) → the resource GET shows

    def missing(self, name: str | None) -> str:
        """The 404 detail when the one resource a watch names does not exist."""
        return f"{self.title} {name!r} not found."


WORKLOAD_STREAM: Final = StreamKind("workload", "Workload", workload_from_row)
SERVICE_STREAM: Final = StreamKind("service", "Service", service_from_row)

_BY_NAME: Final[dict[str, StreamKind]] = {k.name: k for k in (WORKLOAD_STREAM, SERVICE_STREAM)}


def of_change(row: Row) -> StreamKind:
    """The kind a change row of the log is of."""
    return _BY_NAME[row["kind"]]
