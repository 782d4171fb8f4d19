"""The informer: a list+watch cache of one kind that tells handlers which objects changed.

Protocol (docs/DESIGN.md §6, docs/KUBERNETES.md §2):

1. LIST (paged, `limit`/`continue`), apply it to the cache, keep the list's `resourceVersion`.
   The first completed list sets `synced`.
2. WATCH from that version with `allowWatchBookmarks=true` and `timeoutSeconds`. Every event —
   BOOKMARKs included — advances the version the next watch resumes from.
3. When a stream ends (server timeout, a dropped connection, an API server restart), WATCH
   again from the last version seen: no relist, nothing replayed or missed.
4. 410 Gone (an in-stream ERROR event, or the HTTP status) means that version has left the
   server's history: LIST afresh and diff it against the cache — objects that vanished get a
   synthesized DELETED carrying their last known state, new ones ADDED, changed ones MODIFIED.
5. Any other ERROR event, a non-2xx answer or a transport failure ends the attempt; the loop
   waits a jittered exponential backoff (or the server's `Retry-After`) and resumes as in 3
   (as in 4 if the failure happened while listing). Any other exception relists after the
   backoff: only cancellation ends the loop.

The watch is read raw (one JSON event per line) rather than through kubernetes_asyncio's
`Watch`: that helper retries a 410 once and hides it, raises a KeyError on an ERROR without a
reason, and builds a second `ApiClient` per stream (docs/KUBERNETES.md §2).

The cache keeps each object `slimmed` (`app.domain.kube_objects`): without managed fields, and
without the parts of pod specs aicp never reads (a container's command, args and environment),
so a cached Job or Pod costs little more than its metadata and status however large its spec.

Watch lines are decoded with msgspec (a few times faster than the standard library's `json`),
and the loop lets other tasks run after every `EVENTS_PER_TURN` events of a burst.

Handlers are synchronous callables `(event_type, obj)` that must only record or enqueue a
key — they run on the informer's task, between two events, and must do no I/O. A handler that
raises is logged and does not stop the informer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import aiohttp
import msgspec

from app.backoff import Backoff
from app.domain.kube_objects import Key, Manifest, key_of, resource_version_of, slimmed
from app.kube.cache import ObjectCache
from app.kube.errors import Gone, KubeError, TooManyRequests, Unavailable, from_status, translated
from app.kube.memory import release_freed_memory
from app.kube.metrics import INFORMER_SYNCED, WATCH_EVENTS, WATCH_RESTARTS
from app.kube.resources import Resource, request_json

if TYPE_CHECKING:
    from app.kube.cache import IndexKey
    from app.kube.client import KubeClient

log = logging.getLogger(__name__)

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
Handler = Callable[[EventType, Manifest], None]
Accept = Callable[[Manifest], bool]

#: Watch events applied in a row before the informer yields to the event loop: a burst costs
#: the other tasks (requests among them) at most this many events' work at a time.
EVENTS_PER_TURN = 16


class WatchError(KubeError):
    """The watch stream carried something that is not a watch event."""


class Informer:
    """List+watch cache of one `Resource`, optionally narrowed by namespace, label selector and
    an `accept` predicate (for what selectors cannot say, e.g. "namespaces named aicp-*").

    `start()` launches the loop as a named task; `stop()` cancels it and waits. `synced` is set
    once the first list is in the cache and stays set across relists. Read with `get`,
    `by_label`, `by_index`, `list()`; register handlers before `start()` to see the initial ADDEDs.
    """

    def __init__(
        self,
        kube: KubeClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        accept: Accept | None = None,
        watch_timeout: float = 300.0,
        page_size: int = 500,
        backoff: Backoff | None = None,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.kind = resource.kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.accept = accept
        self.watch_timeout = watch_timeout
        self.page_size = page_size
        self.backoff = backoff or Backoff(0.2, 30.0)
        self.cache = ObjectCache()
        self.synced = asyncio.Event()
        self.resource_version: str | None = None
        self._handlers: list[Handler] = []
        self._recovered: list[Callable[[], None]] = []
        self._failed_attempts = 0  # in a row (a stream that ends normally is no failure)
        self._progressed = False
        self._task: asyncio.Task[None] | None = None
        #: Why the last list/watch attempt failed, until one succeeds again (None meanwhile):
        #: what the process supervisor asks to decide that the informer cannot recover.
        self.failing: str | None = None

    # -- reading -------------------------------------------------------------------------------

    def get(self, namespace: str | None, name: str) -> Manifest | None:
        return self.cache.get(namespace, name)

    def by_label(self, label: str, value: str) -> list[Manifest]:
        return self.cache.by_label(label, value)

    def by_index(self, name: str, value: str) -> list[Manifest]:
        return self.cache.by_index(name, value)

    def list(self) -> list[Manifest]:
        return list(self.cache)

    def index_by_label(self, label: str) -> None:
        self.cache.index_by_label(label)

    def index_by(self, name: str, key: IndexKey) -> None:
        self.cache.index_by(name, key)

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def on_recovered(self, callback: Callable[[], None]) -> None:
        """Call `callback` (no I/O) when the server answers again after failed attempts."""
        self._recovered.append(callback)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        """Run the list/watch loop in a task named `informer:<Kind>` (held here)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=f"informer:{self.kind}")
        return self._task

    async def stop(self) -> None:
        """Cancel the loop and wait for it to close its stream."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise

    async def wait_synced(self) -> None:
        """Wait until the first list is cached (bound it with `asyncio.timeout`)."""
        await self.synced.wait()

    async def run(self) -> None:
        """List, then watch and resume forever; only cancellation ends it."""
        while True:
            self._progressed = False
            retry_after: float | None = None
            try:
                if self.resource_version is None:
                    await self._relist()
                await self._watch()
                reason = "ended"
            except Gone as exc:
                # The version we hold has left the server's history: only a list resyncs.
                log.info("%s watch expired, relisting: %s", self.kind, exc.message)
                self.resource_version = None
                reason = "gone"
            except KubeError as exc:
                reason, retry_after = _reason(exc), exc.retry_after
                log.warning(
                    "%s list/watch failed (%s, %d in a row): %s",
                    self.kind,
                    reason,
                    self.backoff.attempt + 1,
                    exc.message,
                )
                self.failing = f"list/watch failed ({reason}): {exc.message}"
            except Exception as exc:
                # Anything else (a malformed page, a decoding error, a bug in a cache update)
                # must not end the informer either: its cache would silently stop changing.
                # Relist: the cache may be half-applied.
                reason = "error"
                self.resource_version = None
                log.error("%s list/watch failed unexpectedly; relisting", self.kind, exc_info=exc)
                self.failing = f"list/watch failed unexpectedly: {exc!r}"
            else:
                self.failing = None  # the stream ended as streams do: the server answers
            self._restarted(reason)
            if self._progressed:
                # A list completed or the stream carried events: the server works again.
                self.backoff.reset()
                self.failing = None
            if reason not in ("ended", "gone"):
                self._failed_attempts += 1
            if reason in ("ended", "gone") and self.backoff.attempt == 0:
                # Resume (or relist) at once; an immediate repeat without progress backs off.
                self.backoff.attempt = 1
                continue
            delay = self.backoff.next()
            if retry_after is not None:
                delay = max(delay, retry_after)
            await asyncio.sleep(delay)

    # -- list ----------------------------------------------------------------------------------

    async def _relist(self) -> None:
        """LIST every page, then make the cache equal to it, telling handlers the differences."""
        listed: dict[Key, Manifest] = {}
        token: str | None = None
        version = ""
        while True:
            query: dict[str, Any] = {"limit": self.page_size}
            if token:
                query["_continue"] = token
            if self.label_selector:
                query["label_selector"] = self.label_selector
            page = await request_json(
                self.resource.method(self.kube, "list", self.namespace)(
                    _preload_content=False, **query
                )
            )
            meta = page.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            for item in page.get("items") or []:
                # Built-in list items carry no kind/apiVersion (docs/KUBERNETES.md §2); watch
                # events do. Fill them in so cached objects look the same either way.
                item.setdefault("kind", self.resource.kind)
                item.setdefault("apiVersion", self.resource.api_version)
                if self.accept is None or self.accept(item):
                    listed[key_of(item)] = slimmed(item)
            token = meta.get("continue") or None
            if not token:
                break
        if not version:
            raise WatchError(f"{self.kind} list carried no resourceVersion")

        for key in self.cache.all_keys():
            if key not in listed:
                gone = self.cache.pop(key)
                if gone is not None:
                    self._notify("DELETED", gone)
        for obj in listed.values():
            old = self.cache.put(obj)
            if old is None:
                self._notify("ADDED", obj)
            elif resource_version_of(old) != resource_version_of(obj):
                self._notify("MODIFIED", obj)
        self.resource_version = version
        listed.clear()
        release_freed_memory()  # what the pages held beyond the slimmed objects
        self._progress()
        if not self.synced.is_set():
            self.synced.set()
            INFORMER_SYNCED.labels(self.kind).set(1)

    # -- watch ---------------------------------------------------------------------------------

    async def _watch(self) -> None:
        """One WATCH from `resource_version` until the stream ends.

        Raises `Gone` on 410 and another `KubeError` on any other failure.
        """
        # client-go's habit: a random timeout in [t, 2t) so that many watchers do not all
        # reconnect at the same moment.
        timeout = max(1, int(self.watch_timeout * (1 + random.random())))
        query: dict[str, Any] = {
            "watch": True,
            "allow_watch_bookmarks": True,
            "timeout_seconds": timeout,
            "resource_version": self.resource_version,
        }
        if self.label_selector:
            query["label_selector"] = self.label_selector
        call = self.resource.method(self.kube, "list", self.namespace)
        with translated():
            response = await call(
                _preload_content=False,
                _request_timeout=aiohttp.ClientTimeout(total=timeout + 30, sock_connect=10),
                **query,
            )
            try:
                if response.status != 200:
                    body = await response.read()
                    raise from_status(
                        response.status, body, retry_after=response.headers.get("Retry-After")
                    )
                applied = 0
                async for line in response.content:
                    if line.strip():
                        self._on_line(line)
                        self._progress()
                        applied += 1
                        if applied % EVENTS_PER_TURN == 0:
                            # A burst read in one piece is otherwise applied (and routed) in
                            # one turn of the event loop, and requests wait behind all of it.
                            await asyncio.sleep(0)
            finally:
                response.release()

    def _on_line(self, line: bytes) -> None:
        try:
            event = msgspec.json.decode(line)
            kind, obj = event["type"], event["object"]
        except (ValueError, KeyError, TypeError) as exc:
            raise WatchError(
                f"{self.kind} watch sent a line that is not an event: {line[:200]!r}"
            ) from exc
        if kind == "ERROR":
            status = obj if isinstance(obj, dict) else {}
            raise from_status(int(status.get("code") or 500), json.dumps(status))
        if not isinstance(obj, dict):
            raise WatchError(f"{self.kind} watch event without an object: {line[:200]!r}")
        version = resource_version_of(obj)
        if kind == "BOOKMARK":
            WATCH_EVENTS.labels(self.kind, "BOOKMARK").inc()
        elif kind in ("ADDED", "MODIFIED", "DELETED"):
            self._apply(kind, obj)
        else:
            log.warning("%s watch sent an unknown event type %r; skipped", self.kind, kind)
        # Advance only after the event is applied: a failure above leaves the version at the
        # previous event, so the resumed watch replays it instead of losing it.
        if version:
            self.resource_version = version

    def _apply(self, kind: EventType, obj: Manifest) -> None:
        accepted = self.accept is None or self.accept(obj)
        if kind == "DELETED" or not accepted:
            # An object that stops passing `accept` leaves the cache like a deletion, as one
            # that stops matching a label selector does on the server side.
            gone = self.cache.pop(key_of(obj))
            if gone is not None or accepted:
                self._notify("DELETED", obj)
            return
        old = self.cache.put(slimmed(obj))
        self._notify("ADDED" if old is None else "MODIFIED", obj)

    def _notify(self, kind: EventType, obj: Manifest) -> None:
        WATCH_EVENTS.labels(self.kind, kind).inc()
        for handler in self._handlers:
            try:
                handler(kind, obj)
            except Exception:
                log.exception("%s informer handler %r failed on %s", self.kind, handler, kind)

    def _progress(self) -> None:
        """A list completed or the stream carried an event: the server works (again)."""
        self._progressed = True
        # Up again from now on, not only once this watch ends: a healthy watch can stay open
        # for minutes, and the process supervisor reads `failing` meanwhile.
        self.failing = None
        if self._failed_attempts:
            self._failed_attempts = 0
            self._tell_recovered()

    def _tell_recovered(self) -> None:
        log.info("%s list/watch works again", self.kind)
        for callback in self._recovered:
            try:
                callback()
            except Exception:
                log.exception("%s informer recovery callback %r failed", self.kind, callback)

    def _restarted(self, reason: str) -> None:
        WATCH_RESTARTS.labels(self.kind, reason).inc()


def _reason(exc: KubeError) -> str:
    if isinstance(exc, TooManyRequests):
        return "throttled"
    if isinstance(exc, Unavailable):
        return "unavailable"
    return "error"
