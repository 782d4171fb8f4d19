"""The Kubernetes objects of an inference service: Deployment, Service, PodDisruptionBudget,
NetworkPolicy and, with `autoscaling`, a HorizontalPodAutoscaler.

Every object is named after the service, lives in the project's namespace and carries the
service's labels (the user's, then aicp's, which win). The Deployment's pods carry Kueue's
queue-name and priority-class labels, so Kueue's plain-pod integration gates each replica
(`kueue.x-k8s.io/admission`) until the pool's quota admits it, one replica at a time. Kueue
adds the flavor's node selector and tolerations at admission, which is why none are set here.

Choices that follow from that:

- The rollout is `RollingUpdate` with `maxSurge: 1` and `maxUnavailable: 1`. A surge-only
  rollout (`maxUnavailable: 0`) in a pool without spare quota would wait forever: its new
  replica is never admitted while every old one holds its quota. With one replica allowed to
  be unavailable, the Deployment controller stops an old replica while the new one waits, the
  old one's quota goes to the new one, and the rollout always progresses (a one-replica
  service is briefly unavailable during a rollout).
- The generation is an annotation on the Deployment's metadata only. Nothing in the pod
  template changes with the generation (no label, annotation or variable), so a new
  generation that only changes the replica count rolls no pod.
- With `autoscaling`, the Deployment declares no `spec.replicas`: under server-side apply the
  field then belongs to the HorizontalPodAutoscaler alone, and aicp never fights it.
- Requests and limits: memory and accelerators are limited to what is requested (an
  accelerator cannot be overcommitted, and a memory limit equal to the request makes an
  OOM-kill name the number the user chose). CPU is requested, not limited: a replica may
  burst, and the autoscaler's CPU utilisation (relative to the request) can pass 100 %.

Every function is deterministic (label and selector maps sorted, env sorted by name), so
applying a rendered object twice is a no-op on the server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from app.domain.labels import (
    GENERATION_LABEL,
    MAIN_CONTAINER,
    PRIORITY_CLASS_LABEL,
    PROJECT_LABEL,
    QUEUE_NAME_LABEL,
    SERVICE_LABEL,
    UID_LABEL,
    managed_labels,
)
from app.domain.naming import local_queue_name
from app.domain.render.queues import priority_class_name

if TYPE_CHECKING:
    from app.domain.kube_objects import Manifest
    from app.domain.render.inputs import ServiceIdentity
    from app.domain.service_specs import ServiceSpec

#: The Deployment annotation that says which generation of the service it was applied for.
GENERATION_ANNOTATION: Final = GENERATION_LABEL
#: The name of the container port the Service, the probe and the NetworkPolicy refer to.
HTTP_PORT_NAME: Final = "http"
#: How long a rollout may make no progress before the Deployment reports it
#: (`Progressing=False`, reason `ProgressDeadlineExceeded`).
PROGRESS_DEADLINE_SECONDS: Final = 600
#: How long a stopping replica has to finish the requests it is serving.
TERMINATION_GRACE_SECONDS: Final = 30
#: The label Kubernetes sets on every namespace: its own name.
NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"


def _sorted(labels: dict[str, str]) -> dict[str, str]:
    return dict(sorted(labels.items()))


def service_labels(identity: ServiceIdentity, spec: ServiceSpec) -> dict[str, str]:
    """The labels of every object of the service: the user's, then aicp's (which win)."""
    return managed_labels(
        {
            **spec.labels,
            PROJECT_LABEL: identity.project,
            SERVICE_LABEL: identity.service,
            UID_LABEL: identity.uid,
        }
    )


def service_pod_labels(identity: ServiceIdentity, spec: ServiceSpec) -> dict[str, str]:
    """The labels of the service's pods: the service's, plus the pool's LocalQueue and the
    priority class Kueue reads when it admits each replica."""
    return managed_labels(
        {
            **service_labels(identity, spec),
            QUEUE_NAME_LABEL: local_queue_name(spec.compute_pool),
            PRIORITY_CLASS_LABEL: priority_class_name(spec.priority),
        }
    )


def _metadata(identity: ServiceIdentity, spec: ServiceSpec) -> dict[str, Any]:
    return {
        "name": identity.name,
        "namespace": identity.namespace,
        "labels": service_labels(identity, spec),
    }


def _env(identity: ServiceIdentity, spec: ServiceSpec) -> list[dict[str, str]]:
    # aicp's variables win over a user key of the same name (the `AICP_` prefix is reserved).
    # No generation: a replica-count change is a new generation and must not roll the pods.
    env = {
        **spec.env,
        "AICP_PROJECT": identity.project,
        "AICP_SERVICE": identity.service,
    }
    return [{"name": name, "value": value} for name, value in sorted(env.items())]


def _resources(identity: ServiceIdentity, spec: ServiceSpec) -> dict[str, dict[str, str]]:
    requests = {"cpu": spec.cpu, "memory": spec.memory}
    limits = {"memory": spec.memory}
    if spec.accelerators > 0:
        requests[identity.accelerator_resource] = str(spec.accelerators)
        limits[identity.accelerator_resource] = str(spec.accelerators)
    return {"requests": _sorted(requests), "limits": _sorted(limits)}


def _container(identity: ServiceIdentity, spec: ServiceSpec) -> dict[str, Any]:
    container: dict[str, Any] = {"name": MAIN_CONTAINER, "image": spec.image}
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    container["env"] = _env(identity, spec)
    # `protocol` is the list's second merge key under server-side apply: always declare it.
    container["ports"] = [{"name": HTTP_PORT_NAME, "containerPort": spec.port, "protocol": "TCP"}]
    container["resources"] = _resources(identity, spec)
    container["readinessProbe"] = {
        "httpGet": {"path": spec.readiness_path, "port": HTTP_PORT_NAME},
        "periodSeconds": 5,
    }
    return container


def render_deployment(identity: ServiceIdentity, spec: ServiceSpec) -> Manifest:
    """The apps/v1 Deployment that runs the service's replicas (see the module docstring for
    the rollout strategy, the generation annotation and `spec.replicas` under autoscaling)."""
    deployment_spec: dict[str, Any] = {}
    if spec.autoscaling is None:
        deployment_spec["replicas"] = spec.replicas
    deployment_spec.update(
        {
            "selector": {"matchLabels": _sorted(identity.selector)},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1},
            },
            "progressDeadlineSeconds": PROGRESS_DEADLINE_SECONDS,
            "revisionHistoryLimit": 3,
            "template": {
                "metadata": {"labels": service_pod_labels(identity, spec)},
                "spec": {
                    "containers": [_container(identity, spec)],
                    "restartPolicy": "Always",
                    "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
                },
            },
        }
    )
    metadata = _metadata(identity, spec)
    metadata["annotations"] = {GENERATION_ANNOTATION: str(identity.generation)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": deployment_spec,
    }


def render_service(identity: ServiceIdentity, spec: ServiceSpec) -> Manifest:
    """The ClusterIP Service in front of the ready replicas, on `spec.port`."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(identity, spec),
        "spec": {
            "type": "ClusterIP",
            "selector": _sorted(identity.selector),
            "ports": [
                {
                    "name": HTTP_PORT_NAME,
                    "port": spec.port,
                    "targetPort": HTTP_PORT_NAME,
                    "protocol": "TCP",
                }
            ],
        },
    }


def render_pod_disruption_budget(identity: ServiceIdentity, spec: ServiceSpec) -> Manifest:
    """A budget of one voluntarily disrupted replica at a time (a node drain takes the
    replicas one by one). A replica that is not ready may always be evicted
    (`unhealthyPodEvictionPolicy: AlwaysAllow`): a crash-looping replica never blocks a
    drain."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(identity, spec),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": _sorted(identity.selector)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def render_network_policy(identity: ServiceIdentity, spec: ServiceSpec) -> Manifest:
    """Only the project's own pods, and those of `identity.ingress_namespace` when set, may
    reach the replicas, and only on `spec.port`."""
    peers: list[dict[str, Any]] = [{"podSelector": {}}]
    if identity.ingress_namespace is not None:
        peers.append(
            {
                "namespaceSelector": {
                    "matchLabels": {NAMESPACE_NAME_LABEL: identity.ingress_namespace}
                }
            }
        )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(identity, spec),
        "spec": {
            "podSelector": {"matchLabels": _sorted(identity.selector)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": peers, "ports": [{"port": spec.port, "protocol": "TCP"}]}],
        },
    }


def render_horizontal_pod_autoscaler(
    identity: ServiceIdentity, spec: ServiceSpec
) -> Manifest | None:
    """The autoscaling/v2 HorizontalPodAutoscaler of the Deployment on its replicas' CPU
    utilisation, or None when the service has no `autoscaling`."""
    scaling = spec.autoscaling
    if scaling is None:
        return None
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _metadata(identity, spec),
        "spec": {
            "scaleTargetRef": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": identity.name,
            },
            "minReplicas": scaling.min_replicas,
            "maxReplicas": scaling.max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {
                            "type": "Utilization",
                            "averageUtilization": scaling.target_cpu_percent,
                        },
                    },
                }
            ],
        },
    }


def service_endpoint(identity: ServiceIdentity, spec: ServiceSpec) -> str:
    """Where the project's pods reach the service: `<name>.<namespace>.svc:<port>`."""
    return f"{identity.name}.{identity.namespace}.svc:{spec.port}"
