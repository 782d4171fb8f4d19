"""Small typed inputs of the renderers that the request structs do not carry.

The spec structs (`WorkloadSpec`, `ServiceSpec`, `Quota`, `BindingPut`) hold what a user asked
for; the identities here hold what the database assigned (uid, generation) and where the object
lives.
Both are immutable, so a render call depends on its arguments only.
"""

from __future__ import annotations

import msgspec

from app.domain.labels import POOL_LABEL, PROJECT_LABEL, SERVICE_LABEL, UID_LABEL
from app.domain.naming import (
    cluster_queue_name,
    job_name,
    legacy_cluster_queue_name,
    local_queue_name,
    namespace_for,
)


class PoolIdentity(msgspec.Struct, frozen=True, kw_only=True):
    """A compute pool of a project, as Kueue sees it: one ClusterQueue and one LocalQueue.

    `uid` is the pool's id: its queues carry it (`aicp.dev/uid`), so aicp knows them for its own.
    """

    project: str
    pool: str
    accelerator_class: str
    uid: str

    @property
    def owner_labels(self) -> dict[str, str]:
        """The labels that make a queue this pool's own (`app.domain.ownership`)."""
        return {PROJECT_LABEL: self.project, POOL_LABEL: self.pool, UID_LABEL: self.uid}

    @property
    def legacy_cluster_queue(self) -> str:
        return legacy_cluster_queue_name(self.project, self.pool)

    @property
    def namespace(self) -> str:
        return namespace_for(self.project)

    @property
    def cluster_queue(self) -> str:
        return cluster_queue_name(self.project, self.pool)

    @property
    def local_queue(self) -> str:
        return local_queue_name(self.pool)


class JobIdentity(msgspec.Struct, frozen=True, kw_only=True):
    """One generation of a workload: the Job aicp creates for it is named from these fields."""

    project: str
    workload: str
    uid: str
    generation: int

    @property
    def namespace(self) -> str:
        return namespace_for(self.project)

    @property
    def job_name(self) -> str:
        return job_name(self.workload, self.uid, self.generation)


class ServiceIdentity(msgspec.Struct, frozen=True, kw_only=True):
    """One generation of an inference service, and what its pool's binding and the installation
    add: the accelerator resource name (`nvidia.com/gpu`) and the namespace, if any, whose pods
    may reach the service besides the project's own (an ingress controller's).

    Every object of the service (Deployment, Service, PodDisruptionBudget, NetworkPolicy,
    HorizontalPodAutoscaler) is named `name`, the service's own name, in the project's
    namespace.
    """

    project: str
    service: str
    uid: str
    generation: int
    accelerator_resource: str
    ingress_namespace: str | None = None

    @property
    def namespace(self) -> str:
        return namespace_for(self.project)

    @property
    def name(self) -> str:
        return self.service

    @property
    def selector(self) -> dict[str, str]:
        """The labels that select the service's pods: its name and its id, on every generation
        (a new generation rolls the pods, it does not change which pods are the service's)."""
        return {SERVICE_LABEL: self.service, UID_LABEL: self.uid}

    @property
    def owner_labels(self) -> dict[str, str]:
        """The labels that make an object this service's own (`app.domain.ownership`)."""
        return {PROJECT_LABEL: self.project, SERVICE_LABEL: self.service, UID_LABEL: self.uid}
