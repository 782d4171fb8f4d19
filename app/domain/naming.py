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
#: 48 bits: two long names with one shortened form cannot be found by trying names.
_HASH_CHARS = 12
_LEGACY_HASH_CHARS = 8
#: The namespace aicp is installed in unless `AICP_NAMESPACE` says otherwise.
DEFAULT_INSTALL_NAMESPACE = "aicp-system"
#: Project names refused whatever the install namespace: `default` reads as Kubernetes' own.
RESERVED_PROJECT_NAMES = ("default",)


def shorten(name: str, limit: int = DNS_LABEL_MAX, *, hash_chars: int = _HASH_CHARS) -> str:
    """Return `name` unchanged if it fits `limit`, else a prefix plus a stable hash suffix.

    The suffix is the first `hash_chars` hex digits of the SHA-256 of the full name, so two
    long names that share a prefix still differ. The result never ends with `-` (a DNS label
    must end with an alphanumeric character).
    """
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:hash_chars]
    head = name[: limit - hash_chars - 1].rstrip("-")
    return f"{head}-{digest}"


def namespace_for(project: str) -> str:
    """The namespace holding a project's workloads: `aicp-<project>`."""
    return shorten(f"{NAME_PREFIX}{project}")


def reserved_project_problem(name: str, install_namespace: str) -> str | None:
    """Why `name` may not name a project, or None: its namespace would be a system one.

    `default` is refused, and the name whose namespace `aicp-<name>` is the one aicp itself
    runs in (`system` while aicp is installed in `aicp-system`). `kube-*` (and `aicp-*`,
    `system-*`) are refused as reserved prefixes of every name (`app.domain.specs`).
    """
    if name in RESERVED_PROJECT_NAMES:
        return f"{name!r} is reserved: it reads as the Kubernetes namespace of that name"
    if namespace_for(name) == install_namespace:
        return (
            f"{name!r} is reserved: its namespace {install_namespace} is the one aicp itself "
            "is installed in"
        )
    return None


def cluster_queue_name(project: str, pool: str) -> str:
    """The Kueue ClusterQueue of a compute pool: `aicp-<project>-<pool>` with every `-` of the
    project doubled, shortened past 63 characters.

    Injective: a DNS label ends with a letter or digit, so every run of `-` in the escaped
    project has an even length and the one `-` after it is the first odd run: `cq-a` + `b-c`
    is `aicp-cq--a-b-c`, `cq-a-b` + `c` is `aicp-cq--a--b-c` (without the escape both were
    `aicp-cq-a-b-c`, one queue for two pools). Names past 63 characters keep a 12-hex-digit
    hash of the whole name; a clash there would take a 48-bit search and is still refused by
    the ownership check (`app.domain.ownership`).
    """
    return shorten(f"{NAME_PREFIX}{project.replace('-', '--')}-{pool}")


def legacy_cluster_queue_name(project: str, pool: str) -> str:
    """The ClusterQueue name earlier versions gave a pool (not injective): `aicp-<project>-<pool>`,
    8 hex digits of hash past 63. The pool step deletes such a queue when it is the pool's own."""
    return shorten(f"{NAME_PREFIX}{project}-{pool}", hash_chars=_LEGACY_HASH_CHARS)


def local_queue_name(pool: str) -> str:
    """The Kueue LocalQueue of a pool in its project's namespace: the pool's own name."""
    return pool


def job_name(workload: str, uid: str, generation: int) -> str:
    """The Job of one generation of a workload: `<workload>-<uid[:6]>-g<generation>`.

    Workload names are at most 40 characters, so the result stays within 63 for any
    generation below 10**12; `shorten` guards the theoretical remainder.
    """
    return shorten(f"{workload}-{uid[:6]}-g{generation}")
