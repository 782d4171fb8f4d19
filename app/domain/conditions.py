"""Condition types and reasons aicp reads on Jobs, Pods, Kueue Workloads and ClusterQueues.

Named here once, as Kueue declares them in its API (`WorkloadQuotaReserved`, `WorkloadAdmitted`,
… in `apis/kueue/v1beta2/workload_types.go`) and Kubernetes in batch/v1 and core/v1; see
docs/KUBERNETES.md §1 and §5 for what each means.
"""

from __future__ import annotations

import enum
from typing import Final


class KueueCondition(enum.StrEnum):
    """Condition types of a Kueue Workload (and `Active` of a ClusterQueue)."""

    QUOTA_RESERVED = "QuotaReserved"
    ADMITTED = "Admitted"
    EVICTED = "Evicted"
    PREEMPTED = "Preempted"
    REQUEUED = "Requeued"
    FINISHED = "Finished"
    ACTIVE = "Active"  # ClusterQueue


class KueueReason(enum.StrEnum):
    """Condition reasons of a Kueue Workload that classification tells apart."""

    PENDING = "Pending"  # QuotaReserved=False: waiting for quota
    PREEMPTED = "Preempted"  # Evicted=True: preempted by another workload
    PODS_READY_TIMEOUT = "PodsReadyTimeout"
    ADMISSION_CHECK = "AdmissionCheck"
    CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
    DEACTIVATED = "Deactivated"
    NODE_FAILURES = "NodeFailures"
    MAXIMUM_EXECUTION_TIME_EXCEEDED = "MaximumExecutionTimeExceeded"


class JobCondition(enum.StrEnum):
    """Condition types of a batch/v1 Job."""

    COMPLETE = "Complete"
    FAILED = "Failed"
    SUCCESS_CRITERIA_MET = "SuccessCriteriaMet"
    FAILURE_TARGET = "FailureTarget"
    SUSPENDED = "Suspended"


#: The Job `Failed` reason of an exceeded `activeDeadlineSeconds`.
DEADLINE_EXCEEDED: Final = "DeadlineExceeded"

#: The pod condition the scheduler sets, and its reason when no node fits.
POD_SCHEDULED: Final = "PodScheduled"
UNSCHEDULABLE: Final = "Unschedulable"


class PodPhase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


class EvictionCause(enum.StrEnum):
    """Why Kueue took an admitted workload back: what decides Preempted against Requeued."""

    PREEMPTED = "Preempted"
    EVICTED = "Evicted"
