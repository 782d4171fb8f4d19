"""Requests translate to the RBAC attributes the apiserver would check."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chart.kube_calls import (
    Attribute,
    attributes_from_sim_stats,
    rbac_attributes,
    read_observed,
    write_observed,
)

JOBS = "/apis/batch/v1/namespaces/aicp-research/jobs"
APPLY = "application/apply-patch+yaml"

CASES = [
    pytest.param("GET", JOBS, False, None, {("batch", "jobs", "list")}, id="list"),
    pytest.param("GET", JOBS, True, None, {("batch", "jobs", "watch")}, id="watch"),
    pytest.param("GET", f"{JOBS}/train-1", False, None, {("batch", "jobs", "get")}, id="get"),
    pytest.param(
        "PATCH",
        f"{JOBS}/train-1",
        False,
        APPLY,
        {("batch", "jobs", "patch"), ("batch", "jobs", "create")},
        id="apply-may-create",
    ),
    pytest.param(
        "PATCH",
        f"{JOBS}/train-1",
        False,
        "application/json-patch+json",
        {("batch", "jobs", "patch")},
        id="finalizer-json-patch",
    ),
    pytest.param("DELETE", f"{JOBS}/train-1", False, None, {("batch", "jobs", "delete")}),
    pytest.param("DELETE", JOBS, False, None, {("batch", "jobs", "deletecollection")}),
    pytest.param("POST", JOBS, False, None, {("batch", "jobs", "create")}, id="create"),
    pytest.param("PUT", f"{JOBS}/j", False, None, {("batch", "jobs", "update")}, id="update"),
    pytest.param(
        "GET",
        "/api/v1/namespaces/{namespace}/pods/{name}/log",
        False,
        None,
        {("", "pods/log", "get")},
        id="pod-log-pattern",
    ),
    pytest.param(
        "GET", "/api/v1/namespaces/aicp-research", False, None, {("", "namespaces", "get")}
    ),
    pytest.param("GET", "/api/v1/namespaces", True, None, {("", "namespaces", "watch")}),
    pytest.param(
        "GET",
        "/api/v1/namespaces?labelSelector=app.kubernetes.io%2Fmanaged-by%3Daicp&limit=500",
        False,
        None,
        {("", "namespaces", "list")},
        id="namespace-informer-list",
    ),
    pytest.param(
        "PUT",
        "/api/v1/namespaces/aicp-research/finalize",
        False,
        None,
        {("", "namespaces/finalize", "update")},
        id="namespace-subresource",
    ),
    pytest.param("GET", "/api/v1/nodes?limit=500", False, None, {("", "nodes", "list")}),
    pytest.param(
        "GET", "/api/v1/watch/pods", False, None, {("", "pods", "watch")}, id="watch-prefix"
    ),
    pytest.param(
        "GET",
        "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/aicp-research-h100/status",
        False,
        None,
        {("kueue.x-k8s.io", "clusterqueues/status", "get")},
        id="cluster-scoped-subresource",
    ),
    pytest.param(
        "PATCH",
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/aicp-r/localqueues/h100",
        False,
        APPLY,
        {("kueue.x-k8s.io", "localqueues", "patch"), ("kueue.x-k8s.io", "localqueues", "create")},
        id="custom-resource-apply",
    ),
    pytest.param("GET", "/_sim/stats", False, None, set(), id="simulator-admin"),
    pytest.param("GET", "/version", False, None, set(), id="non-resource"),
]


@pytest.mark.parametrize(("method", "path", "watch", "content_type", "expected"), CASES)
def test_a_request_is_authorized_as_the_apiserver_would_name_it(
    method: str,
    path: str,
    watch: bool,
    content_type: str | None,
    expected: set[tuple[str, str, str]],
) -> None:
    assert rbac_attributes(method, path, watch=watch, content_type=content_type) == expected


def test_an_http_method_with_no_rbac_verb_is_refused() -> None:
    with pytest.raises(ValueError, match="OPTIONS"):
        rbac_attributes("OPTIONS", JOBS)


def test_observed_calls_survive_a_write_and_read(tmp_path: Path) -> None:
    path = tmp_path / "observed_kube_calls.json"
    attributes = {Attribute("batch", "jobs", "patch"), Attribute("", "pods/log", "get")}

    write_observed(path, attributes, source="a test")

    assert read_observed(path) == attributes


def test_kubesim_stats_become_the_attributes_of_the_calls_they_counted() -> None:
    stats = {
        "by_verb_path": {
            "list /apis/batch/v1/jobs": 1,
            "watch /apis/batch/v1/jobs": 3,
            "patch /apis/batch/v1/namespaces/{namespace}/jobs/{name}": 4,
            "delete /apis/batch/v1/namespaces/{namespace}/jobs/{name}": 1,
            "get /api/v1/namespaces/{namespace}/pods/{name}/log": 2,
            "get /version": 1,
            "get /apis/kueue.x-k8s.io/v1beta2": 1,
        },
        "by_content_type": {"application/apply-patch+yaml": 3, "application/json-patch+json": 1},
    }

    assert attributes_from_sim_stats(stats) == {
        ("batch", "jobs", "list"),
        ("batch", "jobs", "watch"),
        ("batch", "jobs", "patch"),
        ("batch", "jobs", "create"),
        ("batch", "jobs", "delete"),
        ("", "pods/log", "get"),
    }


def test_without_any_apply_a_patch_needs_no_create() -> None:
    stats = {
        "by_verb_path": {"patch /apis/batch/v1/namespaces/{namespace}/jobs/{name}": 1},
        "by_content_type": {"application/merge-patch+json": 1},
    }

    assert attributes_from_sim_stats(stats) == {("batch", "jobs", "patch")}
