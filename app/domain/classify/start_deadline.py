"""The start deadline: how long an admitted workload may hold its quota before a pod starts.

It counts from Kueue's admission (`admission.admitted_at`: from then on the workload holds
quota) and applies only while no pod of the Job has ever started: once a pod ran, or the Job
counts one as ended, the workload has started and `max_runtime_seconds` alone bounds it. A
workload that Kueue evicts and admits again counts from the new admission. A spec without
`start_deadline_seconds` (submitted before the field existed) has no start deadline.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from app.domain.conditions import PodPhase
from app.domain.kube_objects import job_count, phase, terminated

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from app.domain.classify.evidence import ClassifyContext, Evidence
    from app.domain.kube_objects import KubeObject

_STARTED = (PodPhase.RUNNING, PodPhase.SUCCEEDED, PodPhase.FAILED)


def ever_started(job: KubeObject | None, pods: Sequence[KubeObject]) -> bool:
    """Whether a pod of the Job has run (or the Job counts one as ended)."""
    if job_count(job, "succeeded") or job_count(job, "failed"):
        return True
    return any(phase(pod) in _STARTED or terminated(pod) for pod in pods)


def start_deadline(
    job: KubeObject | None,
    pods: Sequence[KubeObject],
    evidence: Evidence,
    context: ClassifyContext,
) -> datetime | None:
    """When the admitted workload's start deadline passes; None when none applies (no
    deadline in the spec, no admission time seen yet, or a pod has started)."""
    admission = evidence.admission
    if context.start_deadline_seconds is None or admission is None:
        return None
    if admission.admitted_at is None or ever_started(job, pods):
        return None
    return admission.admitted_at + timedelta(seconds=context.start_deadline_seconds)
