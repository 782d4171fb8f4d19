"""Project tokens that authenticated recently, kept in memory while every change is heard.

Without it, every request with a project token spends one database round trip on the token
(`authenticate_token`) before its own work. With it, a token seen valid is served from memory
until anything changes any token: the database notifies `aicp_tokens` on every update, delete
or truncate of `api_tokens` (trigger of migration 0008: a revocation, a project's tokens going
with the project, an operator's own SQL), and every replica drops its whole cache when it hears
that. So:

* on the replica that revoked, the revocation holds from the next request on: the API drops
  the cache itself once the revoking transaction committed (`drop_all`), before answering;
* on every other replica, it holds once the notification arrives (milliseconds);
* the cache is used only while the LISTEN connection is up. When the connection is lost the
  cache is dropped and bypassed (every request reads the database, as without a cache) until a
  new connection listens; the cache starts empty then. A notification sent while nobody
  listened can therefore never keep a revoked token alive.

A lookup that raced a change cannot store a stale answer: `generation` is read before the
database read and `put` ignores the answer if a drop happened in between. Expiry is checked on
every hit against the token's `expires_at`. Only valid tokens are cached (a revoked, expired or
unknown token reads the database every time), and at most `max_entries` (then the cache starts
over). The channel is heard on the process's LISTEN connection (`app.store.listener`), which
notices a path that died silently within its probe bound (2 s by default): until then a change
may go unheard, then the cache is dropped and bypassed until the connection is back.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from app.store.changes import TOKENS_CHANNEL

if TYPE_CHECKING:
    import uuid

    from app.store.listener import Channel, Listener

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TokenIdentity:
    """What a presented project token resolves to, as `authenticate_token` read it; the cache
    holds only valid ones (neither revoked nor expired)."""

    id: uuid.UUID
    project_id: uuid.UUID
    project_name: str
    role: str
    revoked: bool
    expired: bool
    expires_at: datetime | None


class RejectedTokens:
    """Digests of project tokens that failed to authenticate, with the reason, so that the same
    bad token sent again costs no database read.

    Safe without invalidation: a rejection never turns into an acceptance. An unknown secret
    stays unknown (the server generates every secret, 256 random bits, and shows it only after
    its row committed), a revoked token stays revoked and an expired one expired (no request
    changes either). At most `max_entries` (then it starts over).
    """

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._reasons: dict[bytes, str] = {}

    def __len__(self) -> int:
        return len(self._reasons)

    def reason(self, digest: bytes) -> str | None:
        """Why the token with this digest was rejected before; None: not known to be bad."""
        return self._reasons.get(digest)

    def reject(self, digest: bytes, reason: str) -> None:
        if self.max_entries <= 0:
            return
        if len(self._reasons) >= self.max_entries:
            self._reasons.clear()
        self._reasons[digest] = reason


class TokenCache:
    """Valid project tokens in memory, live while `aicp_tokens` is heard (module docstring)."""

    def __init__(self, listener: Listener, *, max_entries: int) -> None:
        self.listener = listener
        self._entries: dict[bytes, TokenIdentity] = {}
        self.max_entries = max_entries
        self.generation = 0
        self.listening = asyncio.Event()
        self.connects = 0
        self.drops = 0
        self._interest: Channel | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, digest: bytes) -> TokenIdentity | None:
        """The cached token with this digest, if it is cached, unexpired and the cache live."""
        if not self.listening.is_set():
            return None
        found = self._entries.get(digest)
        if found is None:
            return None
        if found.expires_at is not None and found.expires_at <= datetime.now(UTC):
            del self._entries[digest]
            return None
        return found

    def put(self, digest: bytes, token: TokenIdentity, generation: int) -> None:
        """Remember `token`, read from the database when `self.generation` was `generation`."""
        if generation != self.generation or not self.listening.is_set():
            return  # a change (or a lost connection) came between the read and now
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[digest] = token

    def drop_all(self) -> None:
        """Forget every token; lookups already under way will not store their answers."""
        self._entries.clear()
        self.generation += 1
        self.drops += 1

    async def open(self) -> None:
        """Hear `aicp_tokens`; the cache serves from memory once it is LISTENed on."""
        if self._interest is None:
            self._interest = await self.listener.listen(
                TOKENS_CHANNEL, self._notified, on_connected=self._connected, on_lost=self._lost
            )

    def close(self) -> None:
        """Stop hearing the channel and serving from memory; safe to call more than once."""
        if self._interest is not None:
            self._interest.close()
            self._interest = None
        self.listening.clear()  # an orderly stop: nothing to warn about
        self.drop_all()

    def _connected(self) -> None:
        self.connects += 1
        self.drop_all()  # anything cached before this connection listened is not trusted
        self.listening.set()

    def _lost(self) -> None:
        # First stop serving from memory, then forget: nothing heard from here on.
        if self.listening.is_set():
            log.warning(
                "token cache not listening; every request reads its token from the database "
                "until the LISTEN connection is back"
            )
        self.listening.clear()
        self.drop_all()

    def _notified(self, _payload: str) -> None:
        self.drop_all()
