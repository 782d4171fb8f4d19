"""Pods' logs as the API serves them: the one live read from Kubernetes (docs/DESIGN.md §2).

A workload's and a service's `/logs` share this: the query parameters, each pod's last lines
joined into one text (prefixed `[<pod>] ` when there are several), and `follow=true`, every
started pod's lines as they are printed, until its container ends or the server stops, counted
against the follow limits (app/streams/follows.py).
"""

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

from litestar import Request
from litestar.params import Parameter
from litestar.response import Stream

from app.api import shutdown
from app.domain.kube_objects import Manifest
from app.kube.apply import LogRead, follow_pod_log, pod_logs
from app.kube.client import KubeClient
from app.kube.errors import KubeError
from app.kube.errors import NotFound as KubeNotFound
from app.streams.follows import STATE_KEY as FOLLOWS_KEY
from app.streams.follows import Follows, OpenFollow

DEFAULT_TAIL = 100
MAX_TAIL = 10_000
Tail = Annotated[
    int,
    Parameter(ge=1, le=MAX_TAIL, description=f"Lines per pod, 1 to {MAX_TAIL} (default 100)"),
]
Since = Annotated[
    int | None,
    Parameter(ge=1, le=30 * 86400, description="Only lines newer than this many seconds"),
]
Follow = Annotated[
    bool,
    Parameter(description="Stream: the lines so far, then each new one until the pods end"),
]


async def pod_text(kube: KubeClient, namespace: str, pod: str, read: LogRead) -> str:
    try:
        return await pod_logs(kube, namespace, pod, read)
    except KubeNotFound:
        return ""  # deleted between the list and the read: nothing to show for it


def started(pod: Manifest) -> bool:
    return bool((pod.get("status") or {}).get("phase", "Pending") != "Pending")


async def _followed(
    kube: KubeClient,
    namespace: str,
    pods: list[tuple[str, str]],
    read: LogRead,
    stopping: asyncio.Event,
) -> AsyncIterator[bytes]:
    """Every pod's log as it is printed, line by line, each with its pod's prefix, until
    every container has ended, or the server stops (then a last line says so)."""
    lines: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=1000)

    async def pump(pod: str, label: str) -> None:
        prefix = label.encode()
        pending = b""
        try:
            async for chunk in follow_pod_log(kube, namespace, pod, read):
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    await lines.put(prefix + line + b"\n")
            if pending:
                await lines.put(prefix + pending + b"\n")
        except KubeError:
            pass  # removed or not started any more: nothing (more) to show for this pod
        finally:
            await lines.put(None)

    tasks = [asyncio.create_task(pump(pod, label), name=f"logs:{pod}") for pod, label in pods]
    stopped = asyncio.create_task(stopping.wait(), name="logs:stopping")
    try:
        running = len(tasks)
        while running:
            if lines.empty():
                took = asyncio.ensure_future(lines.get())
                await asyncio.wait({took, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if not took.done():
                    took.cancel()
                    yield shutdown.LOG_STREAM_END.encode() + b"\n"
                    return
                line = took.result()
            else:
                line = lines.get_nowait()
            if line is None:
                running -= 1
            else:
                yield line
    finally:
        for task in [*tasks, stopped]:
            task.cancel()
        for task in [*tasks, stopped]:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _counted(
    follows: Follows | None, held: OpenFollow | None, lines: AsyncIterator[bytes]
) -> AsyncIterator[bytes]:
    """`lines`, giving the follow's place back when the stream ends however it ends."""
    try:
        async for line in lines:
            yield line
    finally:
        if follows is not None and held is not None:
            follows.close(held)


@contextlib.contextmanager
def follow_slot(
    request: Request[Any, Any, Any], actor: str, project_id: uuid.UUID, follow: bool
) -> Iterator[tuple[Follows | None, OpenFollow | None]]:
    """The replica's follow limits and, for `follow=true`, a place among them, taken before
    the request costs a database or a Kubernetes read (429 beyond a limit). The place is given
    back here when the request fails before its stream begins; once it streams, the stream
    gives it back when it ends."""
    follows: Follows | None = request.app.state.get(FOLLOWS_KEY)
    held = follows.open_follow(actor, project_id) if follow and follows else None
    try:
        yield follows, held
    except BaseException:
        if follows is not None and held is not None:
            follows.close(held)
        raise


def follow_stream(
    request: Request[Any, Any, Any],
    follows: Follows | None,
    held: OpenFollow | None,
    kube: KubeClient,
    namespace: str,
    pods: list[tuple[str, str]],
    read: LogRead,
) -> Stream:
    """`follow=true`: the (started) pods' lines, each with its prefix, as they are printed;
    the follow's place is given back when the stream ends."""
    return Stream(
        _counted(
            follows,
            held,
            _followed(kube, namespace, pods, read, shutdown.stopping(request.app)),
        ),
        media_type="text/plain; charset=utf-8",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def joined_text(
    kube: KubeClient,
    namespace: str,
    chosen: list[tuple[Manifest, str]],
    read: LogRead,
) -> str:
    """The chosen pods' last lines as one text: a single unprefixed pod's as it is, otherwise
    every line with its pod's prefix."""
    texts = [
        (label, await pod_text(kube, namespace, str(pod["metadata"]["name"]), read))
        for pod, label in chosen
    ]
    if len(texts) == 1 and not texts[0][0]:
        return texts[0][1]
    return "".join(f"{label}{line}\n" for label, text in texts for line in text.splitlines())
