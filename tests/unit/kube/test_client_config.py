"""Where the client finds its cluster: in-cluster, else KUBECONFIG, else the explicit file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.kube.client import KubeClient, KubeConfigError
from tests.support.kube_settings import client_settings


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


@pytest.fixture(autouse=True)
def no_cluster_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


async def test_the_explicit_kubeconfig_is_used_when_nothing_else_is_configured(
    tmp_path: Path,
) -> None:
    explicit = kubeconfig(tmp_path / "dev", "http://127.0.0.1:7001")
    async with await KubeClient.connect(client_settings(str(explicit))) as kube:
        assert kube.host == "http://127.0.0.1:7001"


async def test_kubeconfig_from_the_environment_wins_over_the_dev_mode_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "env", "http://10.0.0.1:6443")))
    explicit = kubeconfig(tmp_path / "dev", "http://127.0.0.1:7001")
    async with await KubeClient.connect(client_settings(str(explicit))) as kube:
        assert kube.host == "http://10.0.0.1:6443"


async def test_a_kubeconfig_variable_naming_no_file_falls_back_to_the_dev_mode_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    explicit = kubeconfig(tmp_path / "dev", "http://127.0.0.1:7001")
    async with await KubeClient.connect(client_settings(str(explicit))) as kube:
        assert kube.host == "http://127.0.0.1:7001"


async def test_no_configuration_at_all_is_a_clear_error() -> None:
    with pytest.raises(KubeConfigError, match="no Kubernetes configuration"):
        await KubeClient.connect(client_settings(None))
