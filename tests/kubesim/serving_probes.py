"""Typed-client probes for the Deployment tests: what `kubectl get deploy,rs,pods` would show,
and `settled`, which says the controllers have caught up with the clock (every ReplicaSet's
status counts its pods, the Deployment's status sums its ReplicaSets', nothing is Pending)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from tests.kubesim.serving_builders import NS
from tests.support.waiting import wait_until


def ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def condition(deployment: Any, kind: str) -> Any:
    return next((c for c in deployment.status.conditions or [] if c.type == kind), None)


@dataclass
class Serving:
    api: client.ApiClient

    @property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    async def deployment(self, name: str) -> Any:
        return await self.apps.read_namespaced_deployment(name, NS)

    async def replicasets(self, app: str) -> list[Any]:
        listed = await self.apps.list_namespaced_replica_set(NS, label_selector=f"app={app}")
        return sorted(listed.items, key=lambda rs: rs.metadata.creation_timestamp)

    async def pods(self, app: str) -> list[Any]:
        listed = await self.core.list_namespaced_pod(NS, label_selector=f"app={app}")
        return [p for p in listed.items if p.metadata.deletion_timestamp is None]

    async def settled(self, name: str) -> bool:
        d = await self.deployment(name)
        rss = await self.replicasets(name)
        pods = await self.pods(name)
        if any(p.status.phase != "Running" for p in pods):
            return False
        for rs in rss:
            mine = [p for p in pods if p.metadata.owner_references[0].uid == rs.metadata.uid]
            status = rs.status
            if (status.observed_generation or 0) < rs.metadata.generation:
                return False
            if (status.replicas or 0) != rs.spec.replicas or len(mine) != rs.spec.replicas:
                return False
            if (status.ready_replicas or 0) != sum(ready(p) for p in mine):
                return False
        status = d.status
        return (
            (status.observed_generation or 0) >= d.metadata.generation
            and (status.replicas or 0) == sum(rs.status.replicas or 0 for rs in rss)
            and (status.ready_replicas or 0) == sum(rs.status.ready_replicas or 0 for rs in rss)
            and (status.available_replicas or 0)
            == sum(rs.status.available_replicas or 0 for rs in rss)
        )

    async def wait_settled(self, name: str) -> None:
        await wait_until(lambda: self.settled(name), message=f"deployment {name} settled")

    async def wait_ready(self, name: str, count: int) -> list[Any]:
        async def probe() -> list[Any] | None:
            d = await self.deployment(name)
            pods = await self.pods(name)
            done = (d.status.ready_replicas or 0) == count and len(pods) == count
            return pods if done and all(ready(p) for p in pods) else None

        found: list[Any] = await wait_until(probe, message=f"{count} ready pods of {name}")
        return found


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in pod.get("status", {}).get("conditions", [])
    )


def pods_and_ready(pods: list[dict[str, Any]]) -> tuple[int, int, frozenset[str]]:
    """(pods, ready pods, their images): what `kubectl get pods -w` shows at one moment."""
    images = frozenset(p["spec"]["containers"][0]["image"] for p in pods)
    return len(pods), sum(_ready(p) for p in pods), images


def desired_replicas(replicasets: list[dict[str, Any]]) -> int:
    """The summed DESIRED column of `kubectl get rs -w` at one moment."""
    return sum(rs["spec"].get("replicas", 0) for rs in replicasets)


@dataclass
class Watch:
    """One `kubectl get -w`: after each event, `measure` of the objects then present (those
    being deleted left out)."""

    url: str
    measure: Callable[[list[dict[str, Any]]], Any]
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    seen: list[Any] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    async def _read(self) -> None:
        async with aiohttp.ClientSession() as session, session.get(self.url) as resp:
            async for line in resp.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event["object"]
                name = obj["metadata"]["name"]
                if event["type"] == "DELETED" or obj["metadata"].get("deletionTimestamp"):
                    self.objects.pop(name, None)
                else:
                    self.objects[name] = obj
                self.seen.append(self.measure(list(self.objects.values())))

    def start(self) -> Watch:
        self._task = asyncio.create_task(self._read())
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def watch_of(base: str, path: str, app: str, resource_version: str, measure: Any) -> Watch:
    """A watch of `path` (`api/v1/…/pods`, `apis/apps/v1/…/replicasets`) for `app=<app>`."""
    url = f"{base}/{path}?watch=1&labelSelector=app%3D{app}&resourceVersion={resource_version}"
    return Watch(url, measure).start()
