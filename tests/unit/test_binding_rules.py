"""Accelerator bindings are checked as kube-apiserver and Kueue's ResourceFlavor CRD would check
what aicp renders from them, and kubesim refuses the same (generated inputs)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.render.queues import render_resource_flavor
from app.domain.specs import BindingPut, Toleration
from app.domain.validation import check_binding
from kubesim import rules

SAFE = {"resource_name": "nvidia.com/gpu", "flavor": "h100-80g"}
name_chars = st.sampled_from("abcz09-_./ AZ:é")
names = st.text(name_chars, min_size=0, max_size=12) | st.sampled_from(
    ["cpu", "memory", "pods", "ephemeral-storage", "hugepages-2Mi", "nvidia.com/gpu",
     "amd.com/gpu", "kubernetes.io/gpu", "x.kubernetes.io/gpu", "requests.nvidia.com/gpu",
     "a/b/c", "/gpu", "nvidia.com/", "Nvidia.com/gpu", "nvidia.com/" + "g" * 64]
)  # fmt: skip
tolerations = st.builds(
    Toleration,
    key=st.none() | names,
    operator=st.none() | st.sampled_from(["Exists", "Equal"]),
    value=st.none() | st.text(name_chars, max_size=5),
    effect=st.none() | st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
)
bindings = st.builds(
    BindingPut,
    resource_name=names,
    flavor=st.just("h100-80g"),
    node_labels=st.dictionaries(names, st.text(name_chars, max_size=8), max_size=10),
    tolerations=st.lists(tolerations, max_size=10),
)


def job_requesting(resource: str) -> dict[str, Any]:
    container = {"name": "main", "resources": {"limits": {resource: "1"}}}
    return {"spec": {"template": {"spec": {"containers": [container]}}}}


def kube_causes(binding: BindingPut) -> list[tuple[str, str]]:
    flavor = render_resource_flavor(binding)
    causes = rules.check("resourceflavors", flavor)
    if len(binding.node_labels) > 8 or len(binding.tolerations) > 8:
        causes.append(("spec", "too many entries"))  # the CRD's maxProperties / maxItems
    return causes + rules.check("jobs", job_requesting(binding.resource_name))


@settings(max_examples=300)
@given(bindings)
def test_what_aicp_accepts_the_cluster_accepts(binding: BindingPut) -> None:
    if check_binding(binding) == []:
        assert kube_causes(binding) == []


@settings(max_examples=300)
@given(bindings)
def test_what_the_cluster_refuses_aicp_refuses_first(binding: BindingPut) -> None:
    if kube_causes(binding):
        assert check_binding(binding) != []


@pytest.mark.parametrize(
    "resource_name",
    ["cpu", "memory", "pods", "ephemeral-storage", "hugepages-2Mi", "nvidia gpu", "gpu",
     "nvidia.com/gpu/x", "/gpu", "nvidia.com/", "kubernetes.io/gpu", "requests.nvidia.com/gpu",
     "NVIDIA.com/gpu", "nvidia.com/-gpu"],
)  # fmt: skip
def test_built_in_and_malformed_resource_names_are_refused(resource_name: str) -> None:
    violations = check_binding(BindingPut(**{**SAFE, "resource_name": resource_name}))
    assert [field for field, _ in violations] == ["resource_name"]


@pytest.mark.parametrize("resource_name", ["nvidia.com/gpu", "amd.com/gpu", "habana.ai/gaudi"])
def test_extended_resource_names_are_accepted(resource_name: str) -> None:
    assert check_binding(BindingPut(**{**SAFE, "resource_name": resource_name})) == []


@pytest.mark.parametrize(
    ("tolerations", "field"),
    [
        ([{"operator": "Equal", "value": "x"}], "tolerations.0.operator"),
        ([{"key": "k", "operator": "Exists", "value": "v"}], "tolerations.0.value"),
        ([{"key": "k", "operator": "Exists", "value": ""}], "tolerations.0.value"),
        ([{"key": "bad key", "operator": "Exists"}], "tolerations.0.key"),
        ([{"key": "k", "value": "bad value!"}], "tolerations.0.value"),
        ([{"operator": "Exists"}] * 9, "tolerations"),
    ],
)
def test_tolerations_follow_the_resource_flavor_rules(tolerations: list, field: str) -> None:
    binding = msgspec.convert({**SAFE, "tolerations": tolerations}, BindingPut)
    assert field in [f for f, _ in check_binding(binding)]


def test_node_labels_may_use_kubernetes_domains_but_at_most_eight() -> None:
    ok = {"kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "p5.48xlarge"}
    assert check_binding(BindingPut(**SAFE, node_labels=ok)) == []
    many = {f"l{i}": "v" for i in range(9)}
    assert ("node_labels", "must have at most 8 entries") in check_binding(
        BindingPut(**SAFE, node_labels=many)
    )
