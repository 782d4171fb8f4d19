"""How the ranks of a multi-node workload find each other: the headless Service and the
rendezvous environment (docs/API.md "Multi-node workloads").

A workload with `nodes` N > 1 runs as an Indexed Job of N completions. Its pods set
`subdomain` to the name of a headless Service that selects them, so the pod of rank r
answers to `<job>-<r>.<service>.<namespace>.svc` (the Job controller sets each pod's hostname
to `<job>-<r>`). Every container gets the same variables on every cluster:

| variable | value |
|---|---|
| `MASTER_ADDR` | rank 0's DNS name |
| `MASTER_PORT` | `RENDEZVOUS_PORT` (29500, torchrun's default) |
| `NNODES` | N |
| `NODE_RANK` | the pod's completion index (downward API) |
| `NPROC_PER_NODE` | the workload's accelerators (1 without accelerators) |
| `WORLD_SIZE` | NNODES x NPROC_PER_NODE (torch's total process count) |
| `JAX_COORDINATOR_ADDRESS` | `MASTER_ADDR:JAX_COORDINATOR_PORT` (29501) |
| `JAX_NUM_PROCESSES` | N (one JAX process per node) |
| `JAX_PROCESS_ID` | the completion index |
| `AICP_NODES`, `AICP_NODE_RANK`, `AICP_COORDINATOR` | N, the index, `MASTER_ADDR:MASTER_PORT` |

A single-node workload gets none of them: its Job renders exactly as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from app.domain.kube_objects import COMPLETION_INDEX_ANNOTATION
from app.domain.labels import GENERATION_LABEL, UID_LABEL, managed_labels
from app.domain.naming import DNS_LABEL_MAX, shorten

if TYPE_CHECKING:
    from app.domain.kube_objects import Manifest
    from app.domain.render.inputs import JobIdentity
    from app.domain.specs import WorkloadSpec

#: torchrun's default `--master_port`; the headless Service names it.
RENDEZVOUS_PORT: Final = 29500
#: The JAX coordinator's port, next to it so one program may use both.
JAX_COORDINATOR_PORT: Final = 29501

#: Every variable a multi-node workload's containers get from aicp; a user's `env` may name
#: none of them (the `AICP_` prefix is reserved for every workload anyway).
RENDEZVOUS_ENV: Final = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "NNODES",
    "NODE_RANK",
    "NPROC_PER_NODE",
    "JAX_COORDINATOR_ADDRESS",
    "JAX_NUM_PROCESSES",
    "JAX_PROCESS_ID",
    "AICP_NODES",
    "AICP_NODE_RANK",
    "AICP_COORDINATOR",
)
#: The variables whose value is the pod's own rank (from the downward API).
_RANK_ENV: Final = ("AICP_NODE_RANK", "JAX_PROCESS_ID", "NODE_RANK")


def service_name(identity: JobIdentity) -> str:
    """The headless Service of one generation's Job: the Job's name, which is also the
    prefix of every pod hostname. A Service name must start with a letter (RFC 1035), so a
    Job name that starts with a digit gets `w-` in front."""
    name = identity.job_name
    return name if name[0].isalpha() else shorten(f"w-{name}", DNS_LABEL_MAX)


def rank_host(identity: JobIdentity, rank: int) -> str:
    """The DNS name of rank `rank`'s pod (resolvable from any pod of the cluster)."""
    return f"{identity.job_name}-{rank}.{service_name(identity)}.{identity.namespace}.svc"


def coordinator(identity: JobIdentity) -> str:
    """`host:port` of rank 0's rendezvous (`AICP_COORDINATOR`)."""
    return f"{rank_host(identity, 0)}:{RENDEZVOUS_PORT}"


def processes_per_node(spec: WorkloadSpec) -> int:
    """`NPROC_PER_NODE`: one process per accelerator, or one for a CPU-only workload."""
    return max(spec.accelerators, 1)


def rendezvous_env(identity: JobIdentity, spec: WorkloadSpec) -> dict[str, dict[str, Any]]:
    """The rendezvous variables as container env entries (without `name`), by name."""
    master = rank_host(identity, 0)
    nproc = processes_per_node(spec)
    plain = {
        "MASTER_ADDR": master,
        "MASTER_PORT": str(RENDEZVOUS_PORT),
        "WORLD_SIZE": str(spec.nodes * nproc),
        "NNODES": str(spec.nodes),
        "NPROC_PER_NODE": str(nproc),
        "JAX_COORDINATOR_ADDRESS": f"{master}:{JAX_COORDINATOR_PORT}",
        "JAX_NUM_PROCESSES": str(spec.nodes),
        "AICP_NODES": str(spec.nodes),
        "AICP_COORDINATOR": coordinator(identity),
    }
    rank = {
        "valueFrom": {
            "fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"}
        }
    }
    return {
        **{name: {"value": value} for name, value in plain.items()},
        **{name: rank for name in _RANK_ENV},
    }


def service_selector(identity: JobIdentity) -> dict[str, str]:
    """The pods of one generation: aicp's uid and generation labels are on every pod."""
    return {GENERATION_LABEL: str(identity.generation), UID_LABEL: identity.uid}


def render_service(
    identity: JobIdentity, labels: dict[str, str], *, job_uid: str | None
) -> Manifest:
    """The headless Service that gives each rank its DNS name.

    It carries the Job's labels and, once the Job exists (`job_uid`), an owner reference to
    it: Kubernetes' garbage collector removes the Service with its Job, whoever deletes it.
    `publishNotReadyAddresses` publishes a rank's name as soon as its pod has an address, so
    the ranks can rendezvous before any readiness is known.
    """
    metadata: dict[str, Any] = {
        "name": service_name(identity),
        "namespace": identity.namespace,
        "labels": managed_labels(labels),
    }
    if job_uid is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": identity.job_name,
                "uid": job_uid,
                "controller": True,
                "blockOwnerDeletion": False,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": service_selector(identity),
            "ports": [
                {"name": "rendezvous", "port": RENDEZVOUS_PORT, "protocol": "TCP"},
                {"name": "jax", "port": JAX_COORDINATOR_PORT, "protocol": "TCP"},
            ],
        },
    }
