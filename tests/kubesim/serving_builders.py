"""Builders for the objects an inference service is made of: a GPU Deployment, its
PodDisruptionBudget, NetworkPolicy and HorizontalPodAutoscaler (kubesim's tests)."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
NS = "default"


def deployment(
    name: str,
    *,
    replicas: int | None = 2,
    image: str = "ghcr.io/acme/vllm:1.0",
    gpus: int = 1,
    env: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    strategy: Obj | None = None,
    **spec: Any,
) -> Obj:
    """An apps/v1 Deployment of one `server` container selected by `app: <name>`."""
    container: Obj = {
        "name": "server",
        "image": image,
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {},
    }
    template_meta: Obj = {"labels": {"app": name}}
    if annotations:
        template_meta["annotations"] = annotations
    body: Obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": template_meta, "spec": {"containers": [container]}},
            **spec,
        },
    }
    if replicas is not None:
        body["spec"]["replicas"] = replicas
    if strategy is not None:
        body["spec"]["strategy"] = strategy
    return body


def rolling(max_surge: int | str, max_unavailable: int | str) -> Obj:
    return {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": max_unavailable},
    }


def pdb(name: str, app: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": app}}, **spec},
    }


def network_policy(name: str, app: str) -> Obj:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "podSelector": {"matchLabels": {"app": app}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"namespaceSelector": {"matchLabels": {"team": "a"}}}],
                    "ports": [{"protocol": "TCP", "port": 8000}],
                }
            ],
        },
    }


def hpa(name: str, target: str, *, low: int = 1, high: int = 4) -> Obj:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": low,
            "maxReplicas": high,
        },
    }
