"""The Kubernetes client resolves proxy variables once, honouring NO_PROXY."""

from __future__ import annotations

import pytest

from app.kube.client import _env_proxy


@pytest.fixture(autouse=True)
def _clean_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


def test_no_proxy_variables_means_a_direct_connection() -> None:
    assert _env_proxy("https://10.0.0.1:6443") is None


def test_https_proxy_is_used_for_an_https_api_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    assert _env_proxy("https://api.example.test:6443") == "http://proxy.internal:3128"


def test_no_proxy_exempts_the_api_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "api.example.test,.svc")
    assert _env_proxy("https://api.example.test:6443") is None
