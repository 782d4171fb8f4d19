"""Rendering of every Kubernetes object aicp owns, from stored intent (DESIGN.md §6).

One import point for the reconciler; the functions live in `render_queues` (namespace,
flavor, queues, priority classes), `render_job` (the Job and its metadata-only body) and
`render_drift` (what a live object lacks of what aicp declares).
"""

from __future__ import annotations

from app.domain.render_drift import declared_drift
from app.domain.render_job import (
    identity_labels,
    render_job,
    render_job_labels,
    render_job_metadata_only,
)
from app.domain.render_queues import (
    PRIORITY_VALUES,
    Manifest,
    priority_class_name,
    render_cluster_queue,
    render_local_queue,
    render_namespace,
    render_priority_classes,
    render_resource_flavor,
)
from app.domain.rendering_inputs import JobIdentity, PoolIdentity

__all__ = [
    "PRIORITY_VALUES",
    "JobIdentity",
    "Manifest",
    "PoolIdentity",
    "declared_drift",
    "identity_labels",
    "priority_class_name",
    "render_cluster_queue",
    "render_job",
    "render_job_labels",
    "render_job_metadata_only",
    "render_local_queue",
    "render_namespace",
    "render_priority_classes",
    "render_resource_flavor",
]
