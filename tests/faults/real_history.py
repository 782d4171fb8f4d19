"""The real cluster's own account of every Job: a watch on Jobs in every namespace, started
before the first Job and kept open (resumed from the last resourceVersion when the apiserver
closes it) until the scenario ends.

It records each event in the shape `tests.faults.history.JobHistory` reads from kubesim, so
the same checks run on it: Job uids created per workload (ADDED events), Jobs set back to
`suspend: true` after they ran, and the evidence finalizer coming back. A watch that cannot be
resumed without a gap (410 Gone) fails the scenario: a gap could hide exactly the stale write
the checks look for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.faults.history import JobHistory

JOBS = "/apis/batch/v1/jobs"


def _change(event: str, job: dict[str, Any]) -> dict[str, Any]:
    metadata = job["metadata"]
    return {
        "event": event,
        "uid": metadata["uid"],
        "name": metadata["name"],
        "namespace": metadata.get("namespace", ""),
        "labels": metadata.get("labels") or {},
        "suspend": bool((job.get("spec") or {}).get("suspend")),
        "finalizers": metadata.get("finalizers") or [],
        "resource_version": metadata["resourceVersion"],
        "deleting": metadata.get("deletionTimestamp") is not None,
        "monotonic": time.monotonic(),
    }


@dataclass
class WatchedJobHistory(JobHistory):
    """`JobHistory` fed by a watch on the real apiserver (an admin's token; see above)."""

    token: str = ""
    ca_file: str = ""
    namespace_prefix: str = "aicp-"
    failure: BaseException | None = None
    _client: httpx.AsyncClient | None = None
    _task: asyncio.Task[None] | None = None
    _version: str = ""
    _seen: list[dict[str, Any]] = field(default_factory=list)

    async def start(self) -> None:
        context = ssl.create_default_context(cafile=self.ca_file)
        self._client = httpx.AsyncClient(
            base_url=self.url,
            verify=context,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=httpx.Timeout(30.0, read=None),
        )
        listed = (await self._client.get(JOBS)).raise_for_status().json()
        mine = [j for j in listed["items"] if self._ours(j)]
        assert not mine, "the history must start before the first Job"
        self._version = listed["metadata"]["resourceVersion"]
        self._task = asyncio.create_task(self._watch(), name="job-history-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._client is not None:
            await self._client.aclose()

    async def refresh(self) -> list[dict[str, Any]]:
        """What the watch has delivered so far (it runs in the background)."""
        if self.failure is not None:
            raise AssertionError(f"the Job history watch failed: {self.failure!r}")
        self.changes = list(self._seen)
        return self.changes

    def _ours(self, job: dict[str, Any]) -> bool:
        return str(job["metadata"].get("namespace", "")).startswith(self.namespace_prefix)

    async def _watch(self) -> None:
        assert self._client is not None
        params = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "60"}
        try:
            while True:
                query = {**params, "resourceVersion": self._version}
                try:
                    async with self._client.stream("GET", JOBS, params=query) as response:
                        response.raise_for_status()
                        async for line in response.aiter_lines():
                            if line:
                                self._take(json.loads(line))
                except (httpx.TransportError, httpx.RemoteProtocolError):
                    await asyncio.sleep(0.1)  # resumed from the last resourceVersion
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self.failure = exc
            raise

    def _take(self, event: dict[str, Any]) -> None:
        kind, job = event["type"], event["object"]
        if kind == "ERROR":
            raise AssertionError(f"the Job watch cannot resume without a gap: {job}")
        self._version = job["metadata"]["resourceVersion"]
        if kind != "BOOKMARK" and self._ours(job):
            self._seen.append(_change(kind, job))
