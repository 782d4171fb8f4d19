"""The ClusterRole grants exactly what aicp uses: every call it makes, and nothing else.

`observed_kube_calls.json` (next to this file) holds the RBAC attributes of every request aicp
issued against kubesim during the end-to-end golden path, recorded by
`loadtest/record_kube_calls.py` (a `python -m app serve` process) or by `test_rbac_live.py`
with `AICP_RECORD_KUBE_CALLS=1` (see `kube_calls.py` for the format and the translation).
The file is part of the repository: a missing one fails these tests rather than skipping them.
"""

from __future__ import annotations

import pytest

from tests.chart.kube_calls import OBSERVED, Attribute, read_observed
from tests.chart.rendering import granted


@pytest.fixture(scope="module")
def observed() -> set[Attribute]:
    assert OBSERVED.exists(), f"{OBSERVED.name} is missing: record it (see this module's docstring)"
    return read_observed(OBSERVED)


def test_the_cluster_role_covers_every_call_the_reconciler_made(observed: set[Attribute]) -> None:
    missing = sorted(observed - granted())

    assert missing == [], f"aicp would get 403 Forbidden for: {missing}"


def test_the_cluster_role_grants_nothing_the_reconciler_did_not_use(
    observed: set[Attribute],
) -> None:
    unused = sorted(granted() - observed)

    assert unused == [], f"granted but never used (remove from clusterrole.yaml): {unused}"


def test_the_cluster_role_uses_no_wildcards_and_no_escalating_verbs() -> None:
    grants = granted()

    assert not [a for a in grants if "*" in a]
    assert not [a for a in grants if a.verb in {"escalate", "bind", "impersonate"}]
    assert not [a for a in grants if a.verb in {"update", "deletecollection"}]


def test_the_cluster_role_cannot_read_secrets_or_touch_rbac() -> None:
    grants = granted()

    assert not [a for a in grants if a.resource in {"secrets", "configmaps"}]
    assert not [a for a in grants if a.group == "rbac.authorization.k8s.io"]


def test_pods_nodes_and_kueue_workloads_are_read_only() -> None:
    read_only = {"pods", "pods/log", "nodes", "workloads"}

    writes = [
        a for a in granted() if a.resource in read_only and a.verb not in {"get", "list", "watch"}
    ]
    assert writes == []


def test_every_kind_aicp_applies_can_be_created_by_apply() -> None:
    # A server-side apply that finds no object is authorized as create too.
    grants = granted()
    patched = {(a.group, a.resource) for a in grants if a.verb == "patch"}
    created = {(g, r) for g, r, v in grants if v == "create"}

    assert patched <= created
    # Every kind aicp creates it also applies: a multi-node workload's headless Service is only
    # ever created (a POST), but an inference service's ClusterIP Service is applied.
    assert created - patched == set()
