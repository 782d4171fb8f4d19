"""How many pod log follows (`logs?follow=true`) may be open at once, per replica.

A follow holds one connection to the Kubernetes API for as long as the container runs. They
go over a pool of their own (`app.kube.client.KubeSettings.log_connection_pool_size`, as large
as `max_follows`), never the reconciler's; and a follow beyond `max_follows` on the replica,
`per_token` for its token or `per_project` for its project is refused with 429
`too-many-streams` (Retry-After) instead of waiting for a connection. The platform admin
counts as one token.
"""

from __future__ import annotations

import uuid  # noqa: TC003 - a dataclass field
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from app.domain.errors import TooManyStreams
from app.observability.metrics import LOG_FOLLOWS_OPEN, STREAM_DROPS

if TYPE_CHECKING:
    from app.config import Settings

STATE_KEY = "log_follows"


@dataclass(frozen=True)
class FollowLimits:
    max_follows: int
    per_token: int
    per_project: int

    @classmethod
    def of(cls, settings: Settings) -> FollowLimits:
        """The limits the environment sets (app/config.py states the defaults)."""
        return cls(
            max_follows=settings.log_follows_max,
            per_token=settings.log_follows_per_token,
            per_project=settings.log_follows_per_project,
        )


@dataclass(frozen=True)
class OpenFollow:
    """One open follow's place in the counts; `Follows.close` gives it back."""

    token: str
    project: uuid.UUID


@dataclass
class Follows:
    limits: FollowLimits
    _per_token: dict[str, int] = field(default_factory=dict)
    _per_project: dict[uuid.UUID, int] = field(default_factory=dict)
    _count: int = 0

    @property
    def open(self) -> int:
        return self._count

    def open_follow(self, token: str, project: uuid.UUID) -> OpenFollow:
        """Count a new follow, or raise 429 when a limit is reached."""
        refusal: TooManyStreams | None = None
        if self._count >= self.limits.max_follows:
            refusal = TooManyStreams(
                self.limits.max_follows,
                f"This server has {self._count} log follows open, its limit.",
            )
        elif self._per_project.get(project, 0) >= self.limits.per_project:
            refusal = TooManyStreams(
                self.limits.per_project,
                f"This project has {self.limits.per_project} log follows open, its limit.",
            )
        elif self._per_token.get(token, 0) >= self.limits.per_token:
            refusal = TooManyStreams(
                self.limits.per_token,
                f"This token has {self.limits.per_token} log follows open, its limit.",
            )
        if refusal is not None:
            STREAM_DROPS.labels("limit").inc()
            raise refusal
        self._per_token[token] = self._per_token.get(token, 0) + 1
        self._per_project[project] = self._per_project.get(project, 0) + 1
        self._count += 1
        LOG_FOLLOWS_OPEN.set(self._count)
        return OpenFollow(token, project)

    def close(self, follow: OpenFollow) -> None:
        """The follow ended (or never started): give its place back."""
        _less(self._per_token, follow.token)
        _less(self._per_project, follow.project)
        self._count -= 1
        LOG_FOLLOWS_OPEN.set(self._count)


K = TypeVar("K", bound=Hashable)


def _less(counts: dict[K, int], key: K) -> None:
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)
