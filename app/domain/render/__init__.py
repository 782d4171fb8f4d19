"""Rendering of every Kubernetes object aicp owns, from stored intent (docs/DESIGN.md §6).

One import point for the reconciler; the functions live in `queues` (namespace, flavor,
queues, priority classes), `job` (the Job and its metadata-only body), `service` (an
inference service's Deployment, Service, PodDisruptionBudget, NetworkPolicy and autoscaler),
`drift` (what a live object lacks of what aicp declares) and `inputs` (the identities
rendering starts from).
"""

from __future__ import annotations

from app.domain.kube_objects import Manifest
from app.domain.render.drift import declared_drift
from app.domain.render.inputs import JobIdentity, PoolIdentity, ServiceIdentity
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
from app.domain.render.service import (
    render_deployment,
    render_horizontal_pod_autoscaler,
    render_network_policy,
    render_pod_disruption_budget,
    render_service,
    service_endpoint,
    service_labels,
    service_pod_labels,
)

__all__ = [
    "PRIORITY_VALUES",
    "JobIdentity",
    "Manifest",
    "PoolIdentity",
    "ServiceIdentity",
    "declared_drift",
    "identity_labels",
    "namespace_owner_labels",
    "priority_class_name",
    "render_cluster_queue",
    "render_deployment",
    "render_horizontal_pod_autoscaler",
    "render_job",
    "render_job_labels",
    "render_job_metadata_only",
    "render_local_queue",
    "render_namespace",
    "render_network_policy",
    "render_pod_disruption_budget",
    "render_priority_classes",
    "render_resource_flavor",
    "render_service",
    "service_endpoint",
    "service_labels",
    "service_pod_labels",
]
