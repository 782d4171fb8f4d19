"""Kubernetes client settings for tests that talk to one cluster without the service."""

from __future__ import annotations

from app.kube.client import KubeSettings


def client_settings(kubeconfig: str | None) -> KubeSettings:
    """A client of `kubeconfig` (None: the environment's) with a generous write rate."""
    return KubeSettings(
        kubeconfig=kubeconfig, write_qps=1000.0, write_burst=1000, log_connection_pool_size=8
    )
