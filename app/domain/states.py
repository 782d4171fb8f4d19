"""Lifecycle states of reconciled resources (docs/DESIGN.md §7)."""

from __future__ import annotations

import enum


class WorkloadState(enum.StrEnum):
    """Where a workload is on its way from accepted intent to a finished Job."""

    PENDING = "PENDING"  # accepted, nothing applied yet
    QUEUED = "QUEUED"  # Job exists, waiting for Kueue admission
    ADMITTED = "ADMITTED"  # quota reserved, flavor assigned
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    DELETING = "DELETING"  # deletion requested, cleanup not yet observed

    @property
    def is_terminal(self) -> bool:
        return self in (WorkloadState.SUCCEEDED, WorkloadState.FAILED)


class ServiceState(enum.StrEnum):
    """Where an inference service stands: its replicas, their readiness and their rollout."""

    PENDING = "PENDING"  # accepted, nothing applied yet
    PROGRESSING = "PROGRESSING"  # fewer replicas ready than asked, none failing: starting,
    # waiting for quota, or rolling out a new generation
    READY = "READY"  # every replica asked for is ready on the current generation
    DEGRADED = "DEGRADED"  # a replica is failing (OOM-killed, crash looping, image missing),
    # or the rollout cannot finish
    DELETING = "DELETING"  # deletion requested, cleanup not yet observed


class ResourceState(enum.StrEnum):
    """States of projects and compute pools."""

    PENDING = "PENDING"
    READY = "READY"
    DEGRADED = "DEGRADED"
    DELETING = "DELETING"


class Role(enum.StrEnum):
    """Project token roles, each including the rights of the ones before it."""

    VIEWER = "viewer"
    EDITOR = "editor"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return _ROLE_RANK[self]


_ROLE_RANK = {Role.VIEWER: 0, Role.EDITOR: 1, Role.ADMIN: 2}
