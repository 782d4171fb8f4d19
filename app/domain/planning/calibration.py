"""The band a replay gives, corrected by how the pool's past estimates turned out
(split-conformal calibration, docs/PLANNING.md "Calibration").

The replay (`app.domain.planning.forecast`) knows only what the rows say; what it does not model
(the seconds between a pod ending and Kueue admitting the next workload, workloads that arrive
after the estimate and take the quota first, durations that vary more than their history) shows
in its errors. Every recorded estimate keeps the replay's own band beside the one shown, and is
scored at the admission (`app.store.planning`); the pool's newest scored ones say by how much
admissions fell before the replay's p10, after its p90, and away from its p50.

Each past estimate gives three scores, in units of its scale (the replay's wait to its p50, at
least `SCALE_FLOOR_SECONDS`, so a second of lag counts as much at the head of a queue as deep in
it, and a long wait's error grows with the wait):

- `low`: how far the admission fell before the replay's p10 (negative: after it);
- `high`: how far it fell after the replay's p90 (negative: before it);
- `centre`: how far it fell after the replay's p50.

Kueue writes admission times in whole seconds, so an admission is known only to its second
(`RESOLUTION`): the scores take the end of that second that is least favourable to the band, and
an admission counts as inside the band when its second meets it (`inside_band`).

A new band moves its p10 down by the `1 - MISS_SHARE` quantile of `low` and its p90 up by that
of `high` (with the conformal `(n + 1)` correction), each side then missing about `MISS_SHARE`
of the admissions like the past ones (a 95 % band, chosen for drift: see `MISS_SHARE`); p50
moves by the median of `centre`. A quantile may be negative: a band wider than it needs to be
narrows. With fewer than `MIN_SCORED` scored
estimates there is no calibration and the replay's band is shown as it is; the basis says which.
The guarantee is that of conformal prediction: it holds while the pool's future errors are like
its past ones (the same kinds of workload, the same load), not for any one estimate.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

#: The share of admissions each side of the band is meant to miss were the pool's errors like its
#: past ones: 2.5 % (a 95 % band). The past errors understate the coming ones (the scored
#: estimates are those whose workloads started, the shorter waits; a pool's queue deepens under
#: load), so a 90 % target held 58-83 % of the accuracy trace (median 72 %) and this one 64-91 %
#: (median 81 %; docs/BENCHMARKS.md "Planning accuracy"), in bands still inside the p90 wait.
MISS_SHARE = 0.025
#: Scored estimates of the pool a calibration needs; fewer: the replay's band as it is.
MIN_SCORED = 20
#: The newest scored estimates of a pool a calibration reads.
NEWEST_SCORED = 200
#: An estimate's errors are measured in units of its wait, but at least this many seconds.
SCALE_FLOOR_SECONDS = 60.0
#: Kueue writes the admission time in whole seconds (a condition's `lastTransitionTime`): an
#: admission written as second t happened within [t, t + this).
RESOLUTION = timedelta(seconds=1)


def inside_band(earliest: datetime, latest: datetime, admitted_at: datetime) -> bool:
    """Whether an admission written as `admitted_at` fell inside the band: its second meets it."""
    return admitted_at + RESOLUTION >= earliest and admitted_at <= latest


@dataclass(frozen=True, slots=True)
class Scored:
    """One past estimate of the pool, scored: the replay's band (before any calibration), when
    it was made and when Kueue admitted the workload."""

    made_at: datetime
    earliest: datetime
    likely: datetime
    latest: datetime
    started_at: datetime


@dataclass(frozen=True, slots=True)
class Band:
    """Estimated admission times: p10, p50 and p90."""

    earliest: datetime
    likely: datetime
    latest: datetime


def _scale(made_at: datetime, likely: datetime) -> float:
    return max((likely - made_at).total_seconds(), SCALE_FLOOR_SECONDS)


def _conformal(values: list[float], share: float) -> float:
    """The split-conformal `share` quantile of `values`: the ceil((n + 1) * share)-th smallest
    (the largest when that is past the end)."""
    ordered = sorted(values)
    rank = math.ceil((len(ordered) + 1) * share)
    return ordered[min(max(rank, 1), len(ordered)) - 1]


@dataclass(frozen=True, slots=True)
class Calibration:
    """How to move a replay's band, learnt from `samples` scored estimates of the pool."""

    samples: int
    low: float
    high: float
    centre: float

    @classmethod
    def of(cls, scored: Sequence[Scored]) -> Calibration | None:
        """The calibration the scored estimates give (None: fewer than `MIN_SCORED`)."""
        if len(scored) < MIN_SCORED:
            return None
        low, high, centre = [], [], []
        for one in scored:
            scale = _scale(one.made_at, one.likely)
            # The admission is known to the second: the latest it may have been for `low`, the
            # earliest for `high`, the middle of that second for `centre`.
            last = one.started_at + RESOLUTION
            low.append((one.earliest - last).total_seconds() / scale)
            high.append((one.started_at - one.latest).total_seconds() / scale)
            halfway = one.started_at + RESOLUTION / 2
            centre.append((halfway - one.likely).total_seconds() / scale)
        return cls(
            samples=len(scored),
            low=_conformal(low, 1 - MISS_SHARE),
            high=_conformal(high, 1 - MISS_SHARE),
            centre=statistics.median(centre),
        )

    def apply(self, replay: Band, now: datetime) -> Band:
        """`replay`'s band moved by this calibration; never before `now`, and always
        p10 <= p50 <= p90."""
        scale = _scale(now, replay.likely)
        likely = max(replay.likely + timedelta(seconds=self.centre * scale), now)
        earliest = max(replay.earliest - timedelta(seconds=self.low * scale), now)
        latest = replay.latest + timedelta(seconds=self.high * scale)
        return Band(
            earliest=min(earliest, likely),
            likely=likely,
            latest=max(latest, likely),
        )

    def text(self) -> str:
        """For the basis sentence."""
        return f"band calibrated on this pool's last {self.samples} scored estimates"
