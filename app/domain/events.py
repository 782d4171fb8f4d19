"""The closed vocabulary of the audit and lifecycle trail: event types and reasons.

Every writer (`app.store.audit.record_event`, the reconcile steps) takes these enums, the
OpenAPI description of an event lists exactly these values, docs/API.md documents each, and
the database accepts no other (`sql/migrations/0003_vocabulary.sql`).
"""

from __future__ import annotations

import enum


class EventType(enum.StrEnum):
    """What happened to a resource."""

    ACCEPTED = "Accepted"  # a project, pool or workload was created
    CREATED = "Created"  # an accelerator binding or a token was created
    SPEC_UPDATED = "SpecUpdated"  # a new generation of the spec (or a binding replaced)
    DELETION_REQUESTED = "DeletionRequested"
    DELETED = "Deleted"  # an accelerator binding was deleted (immediately)
    REVOKED = "Revoked"  # a token was revoked
    READY = "Ready"  # a project's namespace exists; a pool's queues are active
    DEGRADED = "Degraded"  # a pool's ClusterQueue is not usable
    PENDING = "Pending"  # a pool's ClusterQueue is not (yet, or no longer) active; a
    # workload's Job is gone and a new one will replace it
    QUEUES_APPLIED = "QueuesApplied"  # a pool's ClusterQueue and LocalQueue were applied
    JOB_CREATED = "JobCreated"
    ADMITTED = "Admitted"  # Kueue reserved quota and admitted the workload
    STARTED = "Started"
    RESTARTING = "Restarting"  # a failed pod is retried while the workload stays admitted
    PREEMPTED = "Preempted"  # Kueue preempted the workload; it is queued again
    REQUEUED = "Requeued"  # Kueue evicted it for another cause; it is queued again
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    DRIFT_CORRECTED = "DriftCorrected"
    EVIDENCE_RECORDED = "EvidenceRecorded"
    FINALIZED = "Finalized"  # provider cleanup finished; the resource is gone
    PROGRESSING = "Progressing"  # a service's replicas are starting, waiting or rolling out


class EventReason(enum.StrEnum):
    """A short word that refines an event's type where it helps."""

    CREATED = "Created"
    REPLACED = "Replaced"
    QUOTA_CHANGED = "QuotaChanged"
    DELETED = "Deleted"
    LABELS_RESTORED = "LabelsRestored"
    QUEUES_RESTORED = "QueuesRestored"
    NAMESPACE_RESTORED = "NamespaceRestored"
    JOB_RECREATED = "JobRecreated"
    JOB_REJECTED = "JobRejected"
    START_DEADLINE_EXCEEDED = "StartDeadlineExceeded"
    SCALED = "Scaled"  # a service's replica count changed (PATCH)
    REPLICAS_RESTORED = "ReplicasRestored"  # a service's Deployment scaled by hand, undone
    OBJECT_RESTORED = "ObjectRestored"  # a service's object deleted or edited by hand, restored
