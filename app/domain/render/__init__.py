"""Rendering of every Kubernetes object aicp owns, from stored intent (docs/DESIGN.md §6).

One import point for the reconciler; the functions live in `queues` (namespace, flavor,
queues, priority classes), `job` (the Job and its metadata-only body), `drift` (what a live
object lacks of what aicp declares) and `inputs` (the identities rendering starts from).
"""

from __future__ import annotations

from app.domain.kube_objects import Manifest
from app.domain.render.drift import declared_drift
from app.domain.render.inputs import JobIdentity, PoolIdentity
from app.domain.render.job import (
    identity_labels,
    render_job,
    render_job_labels,
    render_job_metadata_only,
)
from app.domain.render.queues import (
    PRIORITY_VALUES,
    namespace_owner_labels,
    priority_class_name,
    render_cluster_queue,
    render_local_queue,
    render_namespace,
    render_priority_classes,
    render_resource_flavor,
)

__all__ = [
    "PRIORITY_VALUES",
    "JobIdentity",
    "Manifest",
    "PoolIdentity",
    "declared_drift",
    "identity_labels",
    "namespace_owner_labels",
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
