"""What a queued workload's status says of its place in the queue (docs/API.md "Workloads").

The controller computes the position and the band from the pool's rows (`app.store.planning`)
and records them in the workload's status (`app.reconcile.steps.planning`), with the time it
computed them (`computed_at`); reads answer that record, but for a GET of one workload in a
small pool (`app.api.standings`). The sentence leads the stored reason (Kueue's, with the
quota numbers).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import msgspec

from app.domain.planning.forecast import span_text
from app.domain.planning.what_if import EstimatedStart

if TYPE_CHECKING:
    from app.domain.planning.forecast import Forecast

#: Names of the workloads ahead shown at most; the rest are counted.
AHEAD_SHOWN = 10


class QueueStanding(msgspec.Struct, kw_only=True):
    """A queued workload's place in its pool's queue (Kueue's order: priority, then age) and
    an estimate of when Kueue admits it: an estimate, not a reservation."""

    position: Annotated[
        int, msgspec.Meta(ge=1, description="1-based place in the pool's queue", examples=[3])
    ]
    ahead_count: Annotated[
        int, msgspec.Meta(ge=0, description="queued workloads before it", examples=[2])
    ]
    ahead: Annotated[
        list[str],
        msgspec.Meta(
            description=f"the first {AHEAD_SHOWN} of them, head first (the rest are counted "
            "in ahead_count)",
            examples=[["train-a", "train-b"]],
        ),
    ] = []
    eta: EstimatedStart | None = None
    computed_at: Annotated[
        datetime | None,
        msgspec.Meta(
            description="when the controller computed this standing (it looks again on every "
            "change it sees of the workload and every 30 s while it is queued; less often in a "
            "pool of more than 1,500 waiting)"
        ),
    ] = None
    eta_basis: Annotated[
        str,
        msgspec.Meta(
            description="what the estimate rests on, or why there is none",
            examples=[
                "when train-a frees its quota; workloads named train-* took 40-55 min (14 finished)"
            ],
        ),
    ]


def ordinal(number: int) -> str:
    """`1st`, `2nd`, `3rd`, `4th`, `11th`, `22nd`."""
    if 10 <= number % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def standing_of(found: Forecast, computed_at: datetime) -> QueueStanding:
    """The standing a forecast made at `computed_at` gives."""
    band = found.band
    return QueueStanding(
        computed_at=computed_at,
        position=found.position,
        ahead_count=len(found.ahead),
        ahead=list(found.ahead[:AHEAD_SHOWN]),
        eta=EstimatedStart(earliest=band.earliest, likely=band.likely, latest=band.latest)
        if band
        else None,
        eta_basis=found.basis,
    )


def in_words(earliest: datetime, latest: datetime, now: datetime) -> str:
    """`in 12-25 min`, `in about 3 min`, `within a minute`."""
    low = max((earliest - now).total_seconds(), 0.0)
    high = max((latest - now).total_seconds(), 0.0)
    if high < 60:
        return "within a minute"
    return f"in {span_text(low, high)}"


def queued_sentence(standing: QueueStanding, pool: str, now: datetime) -> str:
    """`Queued 3rd in pool h100-pool; likely to start in 12-25 min.`"""
    head = f"Queued {ordinal(standing.position)} in pool {pool}"
    if standing.eta is None:
        return f"{head}; no estimate of when it starts yet."
    return f"{head}; likely to start {in_words(standing.eta.earliest, standing.eta.latest, now)}."
