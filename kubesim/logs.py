"""`GET …/pods/<name>/log`: what the pod printed, as the kubelet serves it through the
apiserver.

- `tailLines` (the last N lines), then `limitBytes`;
- `follow=true`: a chunked `text/plain` answer that sends what is there, then each new line as
  the container prints it, and ends when the container has terminated (or the pod is gone), as
  the real kubelet's follow does. A pod whose container has not started is a 400
  (`container "main" in pod "x" is waiting to start`), again like the real one.

`sinceSeconds`, `timestamps` and `previous` are accepted and ignored: kubesim keeps no time per
line and runs no restarts (docs/KUBESIM.md).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kubesim.model import StoreError

if TYPE_CHECKING:
    from kubesim.model import ResourceType
    from kubesim.store import Store

#: Also look again after this long without a wake-up (a safety net, not the mechanism).
_RECHECK_SECONDS = 1.0


def tail(log: str, q: Any) -> str:
    """`tailLines` (the last N lines) then `limitBytes`, as the kubelet serves them."""
    lines_asked, limit = q.get("tailLines"), q.get("limitBytes")
    if lines_asked is not None and lines_asked.isdigit():
        lines = log.splitlines(keepends=True)
        log = "".join(lines[-int(lines_asked) :]) if int(lines_asked) > 0 else ""
    if limit is not None and limit.isdigit():
        log = log.encode()[: int(limit)].decode(errors="ignore")
    return log


def _ended(pod: dict[str, Any] | None) -> bool:
    """The pod is gone, or its phase says its containers ran to the end."""
    if pod is None:
        return True
    return bool((pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"))


def _waiting(pod: dict[str, Any]) -> bool:
    return bool((pod.get("status") or {}).get("phase", "Pending") == "Pending")


async def serve_log(
    request: web.Request, store: Store, rt: ResourceType, namespace: str, name: str
) -> web.StreamResponse:
    q = request.query
    key = (namespace, name)
    follow = q.get("follow")
    # As the apiserver parses query booleans (kubernetes_asyncio sends "True").
    if follow is None or follow.lower() in ("0", "false", ""):
        return web.Response(text=tail(store.pod_logs.get(key, ""), q), content_type="text/plain")
    pod = store.get(rt, namespace, name)
    if pod is not None and _waiting(pod):
        container = q.get("container") or "main"
        raise StoreError(
            400,
            "BadRequest",
            f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating',
        )
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    sent = tail(store.pod_logs.get(key, ""), q)
    if sent:
        await response.write(sent.encode())
    printed = len(store.pod_logs.get(key, ""))
    while True:
        changed = store.log_changed(namespace, name)
        text = store.pod_logs.get(key, "")
        if len(text) > printed:
            await response.write(text[printed:].encode())
            printed = len(text)
        if _ended(store.get(rt, namespace, name)):
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), _RECHECK_SECONDS)
    await response.write_eof()
    return response
