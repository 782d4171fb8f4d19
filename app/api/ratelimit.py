"""Request rate limits: token buckets per token and per project, reads and writes apart, and
per client address for failed authentications (docs/RELIABILITY.md "Rate limits").

Every ``/api/`` request of a project token spends one token from four buckets at most: its
token's and its project's, for reads (GET, HEAD, OPTIONS) or for writes (everything else). The
platform admin token is not limited (it is the operator's, and it has no project). A bucket
holds ``rate * burst_seconds`` tokens and refills at ``rate`` per second; an empty one answers
429 ``too-many-requests`` with ``Retry-After``: the whole seconds until it holds a token again
(at least 1), and ``limit`` naming the bucket (``token-reads``, ``project-writes``, ...).

Failed authentications that cost a database read (a well-formed token this replica has not
seen before, found unknown, revoked or expired: 401) spend from a bucket per client address,
checked *before* that read: once it is empty, the address is answered 429 instead of reading,
however many distinct bad tokens it sends. Malformed tokens and tokens already rejected once
cost no read (app/api/auth.py) and spend nothing. A rate of 0 turns a limit off.

The buckets live in this process: the limits are per replica (N replicas behind a load
balancer allow up to N times as much). At most ``max_keys`` buckets of each kind are kept; past
that the least recently used one is forgotten (it comes back full, which only errs towards
letting a request through).

Why not a library: the check runs on every request before any I/O, must be synchronous and
O(1), and must say exactly when the next token comes for ``Retry-After``. `limits` (the usual
PyPI choice) offers fixed and moving windows behind an async storage interface with an expiry
task; a token bucket is twenty lines here and needs none of that.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from app.api.methods import READ_METHODS
from app.domain.errors import TooManyRequests
from app.observability.metrics import RATE_LIMITED

if TYPE_CHECKING:
    import uuid
    from collections.abc import Callable, Hashable

    from app.config import Settings


class Requester(Protocol):
    """What the limiter reads of an authenticated caller (`app.api.auth.Caller`)."""

    @property
    def is_admin(self) -> bool: ...

    @property
    def token_id(self) -> uuid.UUID | None: ...

    @property
    def token_project_id(self) -> uuid.UUID | None: ...


@dataclass(frozen=True)
class RateLimits:
    """Requests per second each bucket allows on average (0: no limit), and its burst."""

    reads_per_token: float
    writes_per_token: float
    reads_per_project: float
    writes_per_project: float
    auth_failures_per_client: float
    burst_seconds: float
    max_keys: int = 100_000

    @classmethod
    def of(cls, settings: Settings) -> RateLimits:
        """The limits the environment sets (app/config.py states the defaults)."""
        return cls(
            reads_per_token=settings.rate_reads_per_token,
            writes_per_token=settings.rate_writes_per_token,
            reads_per_project=settings.rate_reads_per_project,
            writes_per_project=settings.rate_writes_per_project,
            auth_failures_per_client=settings.rate_auth_failures_per_client,
            burst_seconds=settings.rate_burst_seconds,
        )


class _Bucket:
    __slots__ = ("stamp", "tokens")

    def __init__(self, tokens: float, stamp: float) -> None:
        self.tokens = tokens
        self.stamp = stamp


class Buckets:
    """Token buckets of one rate, one per key, the least recently used forgotten past
    ``max_keys``."""

    def __init__(
        self,
        rate: float,
        burst: float,
        *,
        max_keys: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.burst = max(1.0, burst)
        self.max_keys = max_keys
        self._clock = clock
        self._buckets: OrderedDict[Hashable, _Bucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def _refilled(self, key: Hashable) -> _Bucket:
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(self.burst, now)
            self._buckets[key] = bucket
            if len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.stamp) * self.rate)
            bucket.stamp = now
        return bucket

    def wait(self, key: Hashable) -> float:
        """Seconds until `key`'s bucket holds a token (0: it holds one now); takes nothing."""
        bucket = self._refilled(key)
        return 0.0 if bucket.tokens >= 1 else (1 - bucket.tokens) / self.rate

    def spend(self, key: Hashable) -> None:
        """Take a token from `key`'s bucket (it may go below zero: the debt is waited off)."""
        self._refilled(key).tokens -= 1


class RateLimiter:
    """The buckets of one replica (see the module docstring)."""

    def __init__(self, limits: RateLimits, *, clock: Callable[[], float] = time.monotonic):
        self.limits = limits

        def buckets(rate: float) -> Buckets | None:
            if rate <= 0:
                return None
            return Buckets(rate, rate * limits.burst_seconds, max_keys=limits.max_keys, clock=clock)

        self._requests: dict[str, Buckets | None] = {
            "token-reads": buckets(limits.reads_per_token),
            "token-writes": buckets(limits.writes_per_token),
            "project-reads": buckets(limits.reads_per_project),
            "project-writes": buckets(limits.writes_per_project),
        }
        self._auth_failures = buckets(limits.auth_failures_per_client)

    def admit(self, caller: Requester, method: str) -> None:
        """Spend this request's tokens, or raise 429 (spending none) when a bucket is empty."""
        if caller.is_admin or caller.token_id is None or caller.token_project_id is None:
            return
        kind = "reads" if method in READ_METHODS else "writes"
        spends: list[tuple[Buckets, Hashable]] = []
        for scope, key in (("token", caller.token_id), ("project", caller.token_project_id)):
            name = f"{scope}-{kind}"
            buckets = self._requests[name]
            if buckets is None:
                continue
            wait = buckets.wait(key)
            if wait > 0:
                RATE_LIMITED.labels(name).inc()
                whose = "This token" if scope == "token" else "This token's project"
                raise _refusal(
                    name, wait, f"{whose} is over its limit of {buckets.rate:g} {kind} per second"
                )
            spends.append((buckets, key))
        for bucket, owner in spends:
            bucket.spend(owner)

    def check_client(self, address: str) -> None:
        """Before a token's database read: 429 when this client address has spent its
        allowance of failed reads."""
        if self._auth_failures is None:
            return
        wait = self._auth_failures.wait(address)
        if wait > 0:
            RATE_LIMITED.labels("client-auth-failures").inc()
            raise _refusal(
                "client-auth-failures",
                wait,
                "Too many requests from this address failed to authenticate",
            )

    def auth_failed(self, address: str) -> None:
        """A token from `address` was read from the database and failed (it answers 401)."""
        if self._auth_failures is not None:
            self._auth_failures.spend(address)


def _refusal(limit: str, wait: float, why: str) -> TooManyRequests:
    refusal = TooManyRequests(limit, wait, why)
    refusal.detail = f"{why}; retry in {refusal.retry_after_seconds} s."
    refusal.args = (refusal.detail,)
    return refusal
