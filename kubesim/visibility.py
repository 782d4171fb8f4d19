"""Kueue's visibility API (`visibility.kueue.x-k8s.io`, v1beta2 and v1beta1): the pending
Workloads of a ClusterQueue or a LocalQueue, in the order kubesim's Kueue admits them
(`QuotaBook.pending_in`: priority, then creation), as Kueue's visibility server answers.

    GET /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/{cq}/pendingworkloads
    GET /apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{ns}/localqueues/{lq}/pendingworkloads

Both take `limit` (default 1000, at most 100,000; 0 is the default, a negative one none) and
`offset` (from 0), and answer a `PendingWorkloadsSummary` whose items are `PendingWorkload`s:
name, namespace, creationTimestamp and ownerReferences, `priority`, `localQueueName`,
`positionInClusterQueue` and `positionInLocalQueue` (both from 0). A ClusterQueue Kueue does
not know is a 404; a LocalQueue it does not know too, but one whose ClusterQueue is missing
has no pending Workloads.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kubesim.model import StoreError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from kubesim.controllers.quota import Pending, QuotaBook
    from kubesim.store import Store

GROUP = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta1", "v1beta2")  # ascending: discovery prefers the last
PREFIX = f"/apis/{GROUP}"
DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000
_SUMMARY = "PendingWorkloadsSummary"

Obj = dict[str, Any]


def resource_list(version: str) -> Obj:
    """The group version's discovery document, as Kueue's visibility server lists it."""
    resources = []
    for plural, singular, namespaced in (
        ("clusterqueues", "clusterqueue", False),
        ("localqueues", "localqueue", True),
    ):
        for name, verbs in ((plural, []), (f"{plural}/pendingworkloads", ["get"])):
            resources.append(
                {
                    "name": name,
                    "singularName": "" if "/" in name else singular,
                    "namespaced": namespaced,
                    "kind": _SUMMARY,
                    "verbs": verbs,
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{GROUP}/{version}",
        "resources": resources,
    }


def serves(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def pending_workloads(
    path: str, query: Mapping[str, str], book: QuotaBook | None, store: Store
) -> Obj:
    """The answer to a GET of `path` (under `PREFIX`); a StoreError for anything else."""
    parts = path[len(PREFIX) :].strip("/").split("/")
    if not parts or parts[0] not in VERSIONS:
        raise _not_found_path()
    version, rest = parts[0], parts[1:]
    if book is None:  # no Kueue runs: as the aggregator answers for an unavailable APIService
        raise StoreError(
            503, "ServiceUnavailable", "the server is currently unable to handle the request"
        )
    limit, offset = _int(query, "limit"), _int(query, "offset")
    limit = min(max(limit or DEFAULT_LIMIT, 0), MAX_LIMIT)
    offset = max(offset, 0)
    if len(rest) == 3 and rest[0] == "clusterqueues" and rest[2] == "pendingworkloads":
        items = _in_cluster_queue(book, store, rest[1], limit, offset)
    elif (
        len(rest) == 5
        and rest[0] == "namespaces"
        and rest[2] == "localqueues"
        and rest[4] == "pendingworkloads"
    ):
        items = _in_local_queue(book, store, rest[1], rest[3], limit, offset)
    else:
        raise _not_found_path()
    return {
        "kind": _SUMMARY,
        "apiVersion": f"{GROUP}/{version}",
        "metadata": {},
        "items": items,
    }


def _in_cluster_queue(
    book: QuotaBook, store: Store, name: str, limit: int, offset: int
) -> list[Obj]:
    if name not in book.cluster_queues:
        raise StoreError(404, "NotFound", f'clusterqueue.{GROUP} "{name}" not found')
    items: list[Obj] = []
    in_local_queue: dict[tuple[str, str], int] = {}
    for index, entry in enumerate(book.pending_in(name)):
        if index >= offset + limit:
            break
        queue = (entry.key[0], entry.local_queue)
        position = in_local_queue.get(queue, 0)
        in_local_queue[queue] = position + 1
        if index >= offset:
            items.append(_item(store, entry, index, position))
    return items


def _in_local_queue(
    book: QuotaBook, store: Store, namespace: str, name: str, limit: int, offset: int
) -> list[Obj]:
    if (namespace, name) not in book.local_queues:
        raise StoreError(404, "NotFound", f'localqueue.{GROUP} "{name}" not found')
    cluster_queue = book.cluster_queue_of(namespace, name)
    items: list[Obj] = []
    skipped = 0
    pending = book.pending_in(cluster_queue) if cluster_queue in book.cluster_queues else ()
    for index, entry in enumerate(pending):
        if len(items) >= limit:
            break
        if entry.key[0] != namespace or entry.local_queue != name:
            continue
        if skipped < offset:
            skipped += 1
        else:
            items.append(_item(store, entry, index, len(items) + offset))
    return items


def _item(store: Store, entry: Pending, in_cluster_queue: int, in_local_queue: int) -> Obj:
    namespace, name = entry.key
    workload = store.get(store.resource("kueue.x-k8s.io", "workloads"), namespace, name) or {}
    meta: Obj = {"name": name, "namespace": namespace, "creationTimestamp": entry.created}
    owners = [
        {key: ref[key] for key in ("apiVersion", "kind", "name", "uid") if key in ref}
        for ref in (workload.get("metadata") or {}).get("ownerReferences") or []
    ]
    if owners:
        meta["ownerReferences"] = owners
    return {
        "metadata": meta,
        "priority": entry.priority,
        "localQueueName": entry.local_queue,
        "positionInClusterQueue": in_cluster_queue,
        "positionInLocalQueue": in_local_queue,
    }


def _int(query: Mapping[str, str], name: str) -> int:
    raw = query.get(name)
    if raw is None or raw == "":
        return 0
    if not re.fullmatch(r"[+-]?[0-9]+", raw):
        raise StoreError(400, "BadRequest", f'strconv.ParseInt: parsing "{raw}": invalid syntax')
    return int(raw)


def _not_found_path() -> StoreError:
    return StoreError(404, "NotFound", "the server could not find the requested resource")
