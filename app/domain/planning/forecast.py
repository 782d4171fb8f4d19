"""When the queued workloads of a pool will likely be admitted: a replay of the pool's future.

The replay follows what Kueue does with a pool's ClusterQueue (`app.domain.planning.queue`):
at every moment quota frees up, the waiting workloads are tried head first and each one that
fits the free quota is admitted (BestEffortFIFO); one that does not fit but has a higher
priority than some holders preempts the fewest of them it needs (lowest priority first, then
the most recently admitted, as `withinClusterQueue: LowerPriority` does), and they wait again
in their old place.

How long each workload holds its quota is not known in advance, so the replay runs many times
(Monte Carlo), each time drawing durations from the history of finished workloads of the same
project (`History`): those of the same name stem when there are enough, else those with the
same labels, else every finished workload of the pool. A running workload's draw is one that
outlasts what it has run so far; every draw is bounded by its `max_runtime_seconds`. Work
that is not submitted yet competes too: when the pool has had enough submissions lately
(`Arrivals`), each replay draws more at that rate (Poisson), each a copy of a recent one, so a
large workload that waits for a hole sees the smaller ones that will take it first, and a
high-priority one that will jump ahead. The admission times over the runs give the band: p10
(earliest), p50 (likely) and p90 (latest).
Without enough history there is no band, and the forecast says so. Times are never before now.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, overload

from app.domain.planning.calibration import Band
from app.domain.planning.queue import (
    NO_DEMAND,
    Demand,
    Entry,
    in_queue_order,
    name_stem,
    order_key,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from app.domain.planning.calibration import Calibration

#: Between the two ends of a range in sentences (`12\u201325 min`): an en dash.
DASH = "\u2013"
#: Finished workloads a group of history needs before its durations are used.
MIN_HISTORY = 3
#: Replays per forecast: enough for stable p10/p90 (each replay is a few hundred steps).
SAMPLES = 200
#: Each drawn duration is spread by a lognormal factor of this sigma (a kernel over the few
#: durations history holds: a handful of past runs under-states how much the next may vary).
KERNEL_SIGMA = 0.25
#: Kueue admits a little after quota frees (its next pass; the watch that tells it), and the
#: admission time it writes is in whole seconds: each admission is drawn this much later.
ADMISSION_LAG_SECONDS = (-1.0, 2.0)
#: A long queue runs fewer replays: about this many entries (submissions to come included)
#: replayed in all, at least `MIN_SAMPLES` replays (a 500-deep queue still gets a p10 and a
#: p90).
SAMPLE_BUDGET = 4000
MIN_SAMPLES = 20
#: A replay stops this far ahead; admissions later than that count as "not within a month".
HORIZON_SECONDS = 30 * 86400.0
#: Submissions to come are replayed when the pool had at least `MIN_ARRIVALS` of its newest
#: `RECENT_ARRIVALS` in the last `ARRIVAL_WINDOW_SECONDS`, at their rate, up to
#: `AHEAD_SPANS` times the span they came in (a one-off burst is not extrapolated far), and
#: not at all once the pool has been quiet for `QUIET_GAPS` of their mean gaps (a stream
#: that stopped: a Poisson one still going is that quiet 5 % of the time).
RECENT_ARRIVALS = 20
MIN_ARRIVALS = 5
ARRIVAL_WINDOW_SECONDS = 3600.0
AHEAD_SPANS = 3.0
QUIET_GAPS = 3.0

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Durations:
    """Seconds some finished workloads held their quota, and which group they are."""

    seconds: tuple[float, ...]
    #: `stem`, `labels` or `pool`: what the workload shares with them.
    kind: str
    #: The stem or the labels as text, for the basis sentence.
    key: str


@dataclass(frozen=True, slots=True)
class Arrivals:
    """The pool's recent submissions, replayed ahead as work to come (`with_arrivals`)."""

    #: How many came in the last `span_seconds` (up to now).
    count: int
    span_seconds: float
    #: What they asked for: each a recent submission (its priority, demand, name, labels).
    kinds: tuple[Entry, ...]

    @property
    def rate(self) -> float:
        """Submissions a second."""
        return self.count / self.span_seconds

    def text(self) -> str:
        span = duration_text(self.span_seconds)
        return f"with submissions to come at this pool's recent rate ({self.count} in {span})"


@dataclass(frozen=True, slots=True)
class History:
    """What the pool's past says of its future: durations of finished workloads of one
    project, grouped the ways the estimate looks them up (built by `history_of`), and the
    pool's recent submissions (`with_arrivals`)."""

    by_stem: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    by_labels: Mapping[Labels, tuple[float, ...]] = field(default_factory=dict)
    pool: tuple[float, ...] = ()
    arrivals: Arrivals | None = None

    def durations_for(self, entry: Entry) -> Durations | None:
        """The closest group with at least `MIN_HISTORY` durations (None: no basis)."""
        stem = self.by_stem.get(entry.stem, ())
        if len(stem) >= MIN_HISTORY:
            return Durations(stem, "stem", entry.stem)
        if entry.labels:
            labelled = self.by_labels.get(entry.labels, ())
            if len(labelled) >= MIN_HISTORY:
                text = ",".join(f"{k}={v}" for k, v in entry.labels)
                return Durations(labelled, "labels", text)
        if len(self.pool) >= MIN_HISTORY:
            return Durations(self.pool, "pool", "")
        return None


@dataclass(frozen=True, slots=True)
class Finished:
    """One finished workload of the project, as history."""

    name: str
    labels: Labels
    seconds: float


def history_of(finished: Sequence[Finished], *, pool: Sequence[float] | None = None) -> History:
    """Group durations by name stem and by label set (`Finished.name` is stemmed here);
    `pool`: the durations of the pool's own finished workloads (default: all of them)."""
    by_stem: dict[str, list[float]] = {}
    by_labels: dict[Labels, list[float]] = {}
    for item in finished:
        by_stem.setdefault(name_stem(item.name), []).append(item.seconds)
        if item.labels:
            by_labels.setdefault(item.labels, []).append(item.seconds)
    return History(
        by_stem={k: tuple(v) for k, v in by_stem.items()},
        by_labels={k: tuple(v) for k, v in by_labels.items()},
        pool=tuple(item.seconds for item in finished) if pool is None else tuple(pool),
    )


def with_arrivals(history: History, recent: Sequence[Entry], now: datetime) -> History:
    """`history` with the pool's `recent` submissions (newest first, `queued_since` when each
    was submitted) as `Arrivals`, when there are enough of them lately; only those whose
    durations history knows are replayed (the others would leave the replay without a basis)."""
    since = now - timedelta(seconds=ARRIVAL_WINDOW_SECONDS)
    lately = [e for e in recent[:RECENT_ARRIVALS] if e.queued_since >= since]
    kinds = tuple(e for e in lately if history.durations_for(e) is not None)
    if len(lately) < MIN_ARRIVALS or not kinds:
        return dataclasses.replace(history, arrivals=None)
    span = max((now - min(e.queued_since for e in lately)).total_seconds(), 1.0)
    quiet = (now - max(e.queued_since for e in lately)).total_seconds()
    if quiet > QUIET_GAPS * span / len(lately):
        return dataclasses.replace(history, arrivals=None)
    return dataclasses.replace(history, arrivals=Arrivals(len(lately), span, kinds))


@dataclass(frozen=True, slots=True)
class Forecast:
    """Where one waiting workload stands and when it will likely be admitted."""

    position: int  # 1-based, in the pool's queue order
    ahead: Sequence[str]  # the names of the waiting workloads before it, head first
    #: The band shown: the replay's, moved by the pool's calibration when it has one.
    band: Band | None
    basis: str
    #: The replay's own band (p10, p50, p90 of its runs), which the calibration learns from.
    replay_band: Band | None = None


@dataclass(slots=True)
class _Holder:
    entry: Entry
    ends: float


def _draw(
    rng: random.Random, durations: Durations | None, entry: Entry, elapsed: float
) -> float | None:
    """Seconds `entry` still holds its quota (None: no basis for it)."""
    bound = float(entry.max_runtime_seconds)
    if durations is None:
        return None
    longer = [s for s in durations.seconds if s > elapsed]
    # One that already ran longer than every one before it ends somewhere up to its bound.
    if longer:
        total = max(rng.choice(longer) * math.exp(rng.gauss(0.0, KERNEL_SIGMA)), elapsed)
    else:
        total = elapsed + rng.random() * max(bound - elapsed, 0.0)
    return max(min(total, bound) - elapsed, 0.0)


def _victims(holders: list[_Holder], entry: Entry, free: Demand) -> list[_Holder] | None:
    """The fewest lower-priority holders whose quota lets `entry` fit (None: none do)."""
    candidates = sorted(
        (h for h in holders if h.entry.priority < entry.priority),
        key=lambda h: (h.entry.priority, -(h.entry.held_since or h.entry.queued_since).timestamp()),
    )
    chosen: list[_Holder] = []
    room = free
    for holder in candidates:
        if entry.demand.fits(room):
            break
        chosen.append(holder)
        room = room + holder.entry.demand
    return chosen if chosen and entry.demand.fits(room) else None


@dataclass(slots=True)
class _Replay:
    """One run of the pool's future (`start_replay`; `admit(0.0)` alone is Kueue's next
    pass, what a dry run asks)."""

    quota: Demand
    history: History
    rng: random.Random
    now: datetime
    holders: list[_Holder]
    waiting: list[Entry]
    starts: dict[uuid.UUID, float]
    preempted: dict[uuid.UUID, list[str]]
    unknown: bool = False
    #: Whether admissions are drawn late (`ADMISSION_LAG_SECONDS`); not in a dry run's pass.
    lag: bool = True

    #: The quota the holders leave free (kept as they come and go).
    room: Demand = NO_DEMAND

    def free(self) -> Demand:
        return self.room

    #: Lower bounds of what any waiting entry asks (set by `start_replay`; entries only leave
    #: or come back, so the bounds hold), and the highest waiting priority.
    smallest: Demand = NO_DEMAND
    highest: int = 0

    def _nothing_fits(self, free: Demand, lowest: float) -> bool:
        """True when no waiting entry can fit `free` nor preempt anyone (`lowest`: the lowest
        holder priority): the rest of a pass would admit nothing."""
        if (
            free.accelerators >= self.smallest.accelerators
            and free.cpu_millis >= self.smallest.cpu_millis
            and free.memory_bytes >= self.smallest.memory_bytes
        ):
            return False
        return self.highest <= lowest

    def _release(self, holder: _Holder) -> None:
        self.room = self.room + holder.entry.demand

    def _hold(self, entry: Entry, at: float) -> None:
        elapsed = 0.0
        if entry.holding and at == 0.0 and entry.held_since is not None:
            elapsed = max((self.now - entry.held_since).total_seconds(), 0.0)
        seconds = _draw(self.rng, self.history.durations_for(entry), entry, elapsed)
        if seconds is None:
            self.unknown = True
            seconds = HORIZON_SECONDS * 2  # no basis: it never ends within the replay
        self.holders.append(_Holder(entry, at + seconds))
        self.room = self.room - entry.demand

    def _lagged(self, at: float) -> float:
        return max(at + self.rng.uniform(*ADMISSION_LAG_SECONDS), 0.0) if self.lag else at

    def _start(self, entry: Entry, at: float) -> None:
        self.waiting.remove(entry)
        start = self._lagged(at)
        self.starts.setdefault(entry.id, start)
        self._hold(entry, start)

    def admit(self, at: float) -> None:
        """Kueue's pass over the waiting workloads at `at`."""
        progressed = True
        while progressed:
            progressed = False
            lowest: float = min((h.entry.priority for h in self.holders), default=math.inf)
            for entry in list(self.waiting):
                free = self.free()
                if self._nothing_fits(free, lowest):
                    break
                if entry.demand.fits(free):
                    self._start(entry, at)
                    lowest = min(lowest, entry.priority)
                    continue
                if entry.priority <= lowest:
                    continue  # nobody it could preempt
                victims = _victims(self.holders, entry, free)
                if victims is None:
                    continue
                for victim in victims:
                    self.holders.remove(victim)
                    self._release(victim)
                    self.waiting.append(victim.entry)
                self.waiting.sort(key=order_key)
                self.waiting.remove(entry)
                if at == 0.0:
                    self.preempted[entry.id] = [v.entry.name for v in victims]
                start = self._lagged(at)
                self.starts.setdefault(entry.id, start)
                self._hold(entry, start)
                progressed = True
                break

    def _next_arrival(self, at: float) -> float:
        """When the next submission to come arrives after `at` (inf: none is replayed)."""
        arrivals = self.history.arrivals
        if arrivals is None:
            return math.inf
        then = at + self.rng.expovariate(arrivals.rate)
        return then if then <= AHEAD_SPANS * arrivals.span_seconds else math.inf

    def _arrive(self, at: float, arrivals: Arrivals) -> None:
        """A submission to come, a copy of a recent one, joins the queue in Kueue's order."""
        like = self.rng.choice(arrivals.kinds)
        entry = dataclasses.replace(
            like,
            id=uuid.UUID(int=self.rng.getrandbits(128)),
            queued_since=self.now + timedelta(seconds=at),
            holding=False,
            held_since=None,
            kueue_uid="",
        )
        bisect.insort(self.waiting, entry, key=order_key)
        # The quota left free did not change since the last pass: only the newcomer may start
        # now, or, with a priority above some holder's, preempt (the whole pass then).
        if entry.demand.fits(self.room):
            self._start(entry, at)
        elif any(h.entry.priority < entry.priority for h in self.holders):
            self.admit(at)

    def run(self, until: set[uuid.UUID]) -> None:
        at = 0.0
        self.admit(at)
        coming = self._next_arrival(at)
        while not until <= self.starts.keys():
            ends = min((h.ends for h in self.holders), default=math.inf)
            if coming < ends and self.history.arrivals is not None:
                at = coming
                self._arrive(at, self.history.arrivals)
                coming = self._next_arrival(at)
                continue
            if ends > HORIZON_SECONDS:
                return
            at = ends
            for ended in [h for h in self.holders if h.ends <= at]:
                self._release(ended)
            self.holders = [h for h in self.holders if h.ends > at]
            self.admit(at)


def start_replay(
    entries: Sequence[Entry], quota: Demand, history: History, now: datetime, seed: int
) -> _Replay:
    replay = _Replay(
        quota=quota,
        history=history,
        rng=random.Random(seed),
        now=now,
        holders=[],
        waiting=in_queue_order(list(entries)),
        starts={},
        preempted={},
        room=quota,
    )
    everyone = list(entries)
    if history.arrivals is not None:
        everyone += history.arrivals.kinds
    if everyone:
        replay.smallest = Demand(
            min(e.demand.accelerators for e in everyone),
            min(e.demand.cpu_millis for e in everyone),
            min(e.demand.memory_bytes for e in everyone),
        )
        replay.highest = max(e.priority for e in everyone)
    for entry in entries:
        if entry.holding:
            replay._hold(entry, 0.0)
    return replay


def _percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile of sorted `values`."""
    index = min(len(values) - 1, max(0, int(share * len(values) + 0.5) - 1))
    return values[index]


def forecast(
    entries: Sequence[Entry],
    quota: Demand,
    history: History,
    now: datetime,
    *,
    samples: int | None = None,
    seed: int = 0,
    calibration: Calibration | None = None,
) -> dict[uuid.UUID, Forecast]:
    """A forecast for every waiting entry of one pool (see the module docstring). `samples`:
    replays to run (default `SAMPLES`, fewer for a long queue: `SAMPLE_BUDGET`);
    `calibration`: how the pool's past estimates turned out (None: the replay's band as it is)."""
    waiting = in_queue_order(list(entries))
    if not waiting:
        return {}
    if samples is None:
        coming = 0 if history.arrivals is None else round(AHEAD_SPANS * history.arrivals.count)
        samples = max(MIN_SAMPLES, min(SAMPLES, SAMPLE_BUDGET // (len(entries) + coming)))
    targets = {entry.id for entry in waiting}
    starts: dict[uuid.UUID, list[float]] = {entry.id: [] for entry in waiting}
    for run in range(samples):
        replay = start_replay(entries, quota, history, now, seed * 1_000_003 + run)
        replay.run(targets)
        for entry_id in targets:
            starts[entry_id].append(replay.starts.get(entry_id, float("inf")))
    holders = [entry for entry in entries if entry.holding]
    names = tuple(entry.name for entry in waiting)
    # What the basis of each entry draws on (the holders', then those ahead's durations),
    # built up along the queue: O(queue) for all of them, not O(queue) each.
    drawn = _Drawn()
    for holder in holders:
        drawn.add(history.durations_for(holder))
    waits_on = holders_text(holders, now)
    result: dict[uuid.UUID, Forecast] = {}
    for position, entry in enumerate(waiting, start=1):
        values = sorted(starts[entry.id])
        band: Band | None = None
        replay_band: Band | None = None
        basis = basis_of(waits_on, position - 1, drawn)
        drawn.add(history.durations_for(entry))
        low, mid, high = (_percentile(values, share) for share in (0.1, 0.5, 0.9))
        if high == float("inf") or basis is None:
            basis = basis or NO_BASIS
            if high == float("inf") and mid != float("inf") and basis != NO_BASIS:
                basis = "not within a month in at least 1 of 10 replays; " + basis
            band = None
        else:
            replay_band = band = Band(
                earliest=now + timedelta(seconds=low),
                likely=now + timedelta(seconds=mid),
                latest=now + timedelta(seconds=high),
            )
            if history.arrivals is not None and (holders or position > 1):
                basis = f"{basis}; {history.arrivals.text()}"
            if calibration is not None:
                band = calibration.apply(replay_band, now)
                basis = f"{basis}; {calibration.text()}"
        result[entry.id] = Forecast(
            position=position,
            ahead=Prefix(names, position - 1),
            band=band,
            basis=basis,
            replay_band=replay_band,
        )
    return result


NO_BASIS = (
    "no estimate: fewer than 3 finished workloads of this project in this pool to learn "
    "durations from"
)


def duration_text(seconds: float) -> str:
    """`40 s`, `12 min`, `3.5 h`, `2 d`: a rough duration for sentences."""
    if seconds < 90:
        return f"{max(round(seconds), 0)} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    if seconds < 36 * 3600:
        hours = seconds / 3600
        return f"{hours:.1f} h".replace(".0 h", " h")
    return f"{round(seconds / 86400)} d"


def span_text(low: float, high: float) -> str:
    """`12-25 min`, `about 3 min`, `40 s-2 h`: a range of two durations."""
    low_text, high_text = duration_text(low), duration_text(high)
    if low_text == high_text:
        return f"about {low_text}"
    low_number, _, low_unit = low_text.partition(" ")
    high_number, _, high_unit = high_text.partition(" ")
    if low_unit == high_unit:
        return f"{low_number}{DASH}{high_number} {high_unit}"
    return f"{low_text}{DASH}{high_text}"


def _range(seconds: Sequence[float]) -> str:
    ordered = sorted(seconds)
    return span_text(_percentile(ordered, 0.1), _percentile(ordered, 0.9))


def _names(entries: Sequence[Entry], limit: int = 3) -> str:
    names = [e.name for e in entries[:limit]]
    more = len(entries) - len(names)
    text = ", ".join(names)
    return f"{text} and {more} more" if more > 0 else text


class Prefix(Sequence[str]):
    """The first `count` of one shared tuple of names, not copied: a queue of n waiting
    workloads holds n of these in O(n), where a tuple of the names ahead of each was O(n²)."""

    __slots__ = ("_count", "_names")

    def __init__(self, names: tuple[str, ...], count: int) -> None:
        self._names = names
        self._count = count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...
    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        if isinstance(index, slice):
            return self._names[slice(*index.indices(self._count))]
        if not -self._count <= index < self._count:
            raise IndexError(index)
        return self._names[index % self._count]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


class _Drawn:
    """The durations a forecast's basis draws on so far, by group in the order first met, and
    whether one of them had none."""

    def __init__(self) -> None:
        self.groups: dict[str, Durations] = {}
        self.missing = False

    def add(self, durations: Durations | None) -> None:
        if durations is None:
            self.missing = True
        else:
            self.groups.setdefault(durations.kind + durations.key, durations)


def holders_text(holders: Sequence[Entry], now: datetime) -> str:
    """What every waiting workload of the pool waits on first: its holders freeing quota."""
    if not holders:
        return ""
    oldest = min((h.held_since or now) for h in holders)
    verb = "frees its" if len(holders) == 1 else "free their"
    running = f"when {_names(list(holders))} {verb} quota"
    elapsed = (now - oldest).total_seconds()
    if elapsed >= 60:
        running += f" (the oldest admitted {duration_text(elapsed)} ago)"
    return running


def basis_of(waits_on: str, ahead: int, drawn: _Drawn) -> str | None:
    """The one-line basis of a forecast: what it waits for (`waits_on`: the holders, from
    `holders_text`; `ahead`: how many wait before it) and what the durations come from
    (`drawn`: those of the holders and of the ones ahead; None: some workload it depends on
    has no history to draw from)."""
    if not waits_on and not ahead:
        return "nothing holds the pool's quota: Kueue admits it at its next pass"
    if drawn.missing:
        return None
    groups = drawn.groups
    parts = [waits_on] if waits_on else []
    if ahead:
        parts.append(f"after {ahead} queued ahead")
    sources = []
    for durations in list(groups.values())[:2]:
        took = _range(durations.seconds)
        count = len(durations.seconds)
        if durations.kind == "stem":
            sources.append(f"workloads named {durations.key}-* took {took} ({count} finished)")
        elif durations.kind == "labels":
            sources.append(f"workloads labelled {durations.key} took {took} ({count} finished)")
        else:
            sources.append(f"this pool's finished workloads took {took} ({count})")
    return "; ".join([" ".join(parts), *sources])
