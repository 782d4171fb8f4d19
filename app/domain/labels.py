"""Label keys, values and finalizers aicp writes or reads on Kubernetes objects (docs/DESIGN.md §6).

The informers index caches by `UID_LABEL`, the reconciler selects its own objects by
`MANAGED_BY_LABEL`, and drift detection compares these labels with what it finds, so every
module that reads or writes them imports them from here. The labels other controllers set
(the Job controller's, Kueue's) are here too, so one module names every key aicp relies on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE: Final = "aicp"
#: The label selector of every object aicp created (`app.kubernetes.io/managed-by=aicp`).
MANAGED_BY_SELECTOR: Final = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
#: Every name aicp gives a namespace or a cluster-scoped object starts with this.
NAME_PREFIX: Final = "aicp-"
PROJECT_LABEL: Final = "aicp.dev/project"
POOL_LABEL: Final = "aicp.dev/pool"
WORKLOAD_LABEL: Final = "aicp.dev/workload"
UID_LABEL: Final = "aicp.dev/uid"
#: On every object of an inference service (and its pods): the service's name. The informer
#: handler routes an object carrying it to the service, not to a workload.
SERVICE_LABEL: Final = "aicp.dev/service"
GENERATION_LABEL: Final = "aicp.dev/generation"
ACCELERATOR_CLASS_LABEL: Final = "aicp.dev/accelerator-class"

#: Kueue reads these two labels on a Job; the queue name may only change while it is suspended.
QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL: Final = "kueue.x-k8s.io/priority-class"

#: Held on every Job aicp creates until its final facts are recorded (docs/DESIGN.md §6).
EVIDENCE_FINALIZER: Final = "aicp.dev/evidence"

#: The server-side apply field manager of every aicp write.
FIELD_MANAGER: Final = "aicp"
#: The field manager of `render_job_metadata_only` applies. It must differ from the one that
#: created the Job: server-side apply removes every field a manager declared before and no
#: longer declares, so a metadata-only body under `aicp` would try to delete the Job's spec
#: (422, the template of a started Job is immutable; worse, a suspended Job would lose
#: `suspend: true` and start without admission).
JOB_METADATA_FIELD_MANAGER: Final = "aicp-metadata"

#: Pods of a Job carry the Job's uid under this label (set by the Job controller).
JOB_CONTROLLER_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
#: Pods of a Job carry the Job's name under this label (set by the Job controller).
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
#: Kueue labels the Workload it creates for a Job with the Job's uid.
KUEUE_JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"

#: The single container every aicp Job runs.
MAIN_CONTAINER: Final = "main"

#: The Kueue API version aicp speaks (v1beta2 is storage since Kueue 0.16).
KUEUE_API_VERSION: Final = "kueue.x-k8s.io/v1beta2"


def managed_labels(extra: Mapping[str, str]) -> dict[str, str]:
    """`app.kubernetes.io/managed-by: aicp` plus `extra`, with keys in sorted order.

    aicp's own keys win over a clashing key in `extra`, so a user label can never hide
    the managed-by marker.
    """
    labels = {**extra, MANAGED_BY_LABEL: MANAGED_BY_VALUE}
    return dict(sorted(labels.items()))
