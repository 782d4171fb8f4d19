"""Deterministic Kubernetes object names derived from stored rows (docs/DESIGN.md §6).

The API shows these names in resource status before anything exists in the cluster, and the
reconciler creates objects under exactly these names, so both must call the same functions.
Every function is pure: the same input gives the same name on every replica, which is what
lets a repeated reconcile step adopt an existing object instead of creating a duplicate.
"""

from __future__ import annotations

import hashlib

from app.domain.labels import NAME_PREFIX

#: Kubernetes limits object names that are DNS-1123 labels to this many characters.
DNS_LABEL_MAX = 63
_HASH_CHARS = 8


def shorten(name: str, limit: int = DNS_LABEL_MAX) -> str:
    """Return `name` unchanged if it fits `limit`, else a prefix plus a stable hash suffix.

    The suffix is the first 8 hex digits of the SHA-256 of the full name, so two long names
    that share a prefix still differ. The result never ends with `-` (a DNS label must end
    with an alphanumeric character).
    """
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_CHARS]
    head = name[: limit - _HASH_CHARS - 1].rstrip("-")
    return f"{head}-{digest}"


def namespace_for(project: str) -> str:
    """The namespace holding a project's workloads: `aicp-<project>`."""
    return shorten(f"{NAME_PREFIX}{project}")


def cluster_queue_name(project: str, pool: str) -> str:
    """The Kueue ClusterQueue of a compute pool: `aicp-<project>-<pool>`, shortened past 63."""
    return shorten(f"{NAME_PREFIX}{project}-{pool}")


def local_queue_name(pool: str) -> str:
    """The Kueue LocalQueue of a pool in its project's namespace: the pool's own name."""
    return pool


def job_name(workload: str, uid: str, generation: int) -> str:
    """The Job of one generation of a workload: `<workload>-<uid[:6]>-g<generation>`.

    Workload names are at most 40 characters, so the result stays within 63 for any
    generation below 10**12; `shorten` guards the theoretical remainder.
    """
    return shorten(f"{workload}-{uid[:6]}-g{generation}")
