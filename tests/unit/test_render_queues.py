"""Namespace, ResourceFlavor, ClusterQueue, LocalQueue and priority classes as aicp renders them."""

from __future__ import annotations

import copy

import jsonschema
import pytest

from app.domain.render import (
    PoolIdentity,
    render_cluster_queue,
    render_local_queue,
    render_namespace,
    render_priority_classes,
    render_resource_flavor,
)
from app.domain.specs import BindingPut, Quota, Toleration
from tests.support.kube_schemas import check_metadata, validate_builtin, validate_kueue

H100 = BindingPut(
    resource_name="nvidia.com/gpu",
    flavor="h100-80g",
    node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    tolerations=[Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")],
)
POOL_UID = "5f0c6a52-3f0e-4c1b-9d7e-2b1f7c3a9e10"
POOL = PoolIdentity(
    project="research", pool="h100-pool", accelerator_class="h100-80g", uid=POOL_UID
)
QUOTA = Quota(accelerators=16, cpu="256", memory="2Ti")
LONGEST = PoolIdentity(project="p" * 30, pool="q" * 30, accelerator_class="h100-80g", uid=POOL_UID)


def test_the_project_namespace_is_valid_and_labelled_for_its_cluster_queues() -> None:
    namespace = render_namespace("research", POOL_UID)

    validate_builtin(namespace)
    check_metadata(namespace, namespaced=False)
    assert namespace["metadata"]["name"] == "aicp-research"
    assert namespace["metadata"]["labels"] == {
        "aicp.dev/project": "research",
        "aicp.dev/uid": POOL_UID,
        "app.kubernetes.io/managed-by": "aicp",
    }


def test_the_namespace_of_a_30_character_project_fits_a_dns_label() -> None:
    namespace = render_namespace("p" * 30, POOL_UID)

    validate_builtin(namespace)
    check_metadata(namespace, namespaced=False)


def test_the_resource_flavor_carries_the_bindings_node_labels_and_tolerations() -> None:
    flavor = render_resource_flavor(H100)

    validate_kueue(flavor)
    check_metadata(flavor, namespaced=False)
    assert flavor["metadata"]["name"] == "h100-80g"
    assert flavor["spec"] == {
        "nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }


def test_a_binding_without_labels_or_tolerations_renders_an_empty_flavor_spec() -> None:
    flavor = render_resource_flavor(BindingPut(resource_name="amd.com/gpu", flavor="mi300"))

    validate_kueue(flavor)
    assert flavor["spec"] == {}


def test_the_cluster_queue_admits_only_the_projects_namespace_with_the_pools_quota() -> None:
    queue = render_cluster_queue(POOL, QUOTA, H100)

    validate_kueue(queue)
    check_metadata(queue, namespaced=False)
    assert queue["metadata"]["name"] == "aicp-research-h100-pool"
    spec = queue["spec"]
    assert spec["namespaceSelector"] == {"matchLabels": {"aicp.dev/project": "research"}}
    assert spec["resourceGroups"] == [
        {
            "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
            "flavors": [
                {
                    "name": "h100-80g",
                    "resources": [
                        {"name": "cpu", "nominalQuota": "256"},
                        {"name": "memory", "nominalQuota": "2Ti"},
                        {"name": "nvidia.com/gpu", "nominalQuota": 16},
                    ],
                }
            ],
        }
    ]


def test_the_cluster_queue_uses_no_cohort_field_at_all() -> None:
    spec = render_cluster_queue(POOL, QUOTA, H100)["spec"]

    assert "cohort" not in spec and "cohortName" not in spec


def test_the_strict_kueue_schema_would_reject_the_v1beta1_cohort_field() -> None:
    queue = copy.deepcopy(render_cluster_queue(POOL, QUOTA, H100))
    queue["spec"]["cohort"] = "research"

    with pytest.raises(jsonschema.ValidationError, match="cohort"):
        validate_kueue(queue)


def test_a_quota_change_changes_only_the_nominal_quotas() -> None:
    before = render_cluster_queue(POOL, QUOTA, H100)
    after = render_cluster_queue(POOL, Quota(accelerators=32, cpu="512", memory="4Ti"), H100)

    validate_kueue(after)
    assert after["metadata"] == before["metadata"]
    assert after["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": "512"},
        {"name": "memory", "nominalQuota": "4Ti"},
        {"name": "nvidia.com/gpu", "nominalQuota": 32},
    ]


def test_a_pool_with_no_accelerator_quota_still_covers_the_accelerator_resource() -> None:
    queue = render_cluster_queue(POOL, Quota(accelerators=0, cpu="8", memory="32Gi"), H100)

    validate_kueue(queue)
    resources = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert {"name": "nvidia.com/gpu", "nominalQuota": 0} in resources


def test_the_longest_project_and_pool_names_give_a_shortened_valid_cluster_queue_name() -> None:
    queue = render_cluster_queue(LONGEST, QUOTA, H100)

    validate_kueue(queue)
    check_metadata(queue, namespaced=False)
    name = queue["metadata"]["name"]
    assert len(name) <= 63 and name.startswith("aicp-ppp")
    local = render_local_queue(LONGEST)
    assert local["spec"]["clusterQueue"] == name


def test_the_local_queue_is_named_after_the_pool_in_the_project_namespace() -> None:
    local = render_local_queue(POOL)

    validate_kueue(local)
    check_metadata(local, namespaced=True)
    assert local["metadata"]["name"] == "h100-pool"
    assert local["metadata"]["namespace"] == "aicp-research"
    assert local["spec"] == {"clusterQueue": "aicp-research-h100-pool"}


def test_three_priority_classes_are_rendered_low_normal_high() -> None:
    classes = render_priority_classes()

    for priority_class in classes:
        validate_kueue(priority_class)
        check_metadata(priority_class, namespaced=False)
    assert {c["metadata"]["name"]: c["value"] for c in classes} == {
        "aicp-low": 100,
        "aicp-normal": 1000,
        "aicp-high": 10000,
    }


@pytest.mark.parametrize(
    "render",
    [
        pytest.param(lambda: render_namespace("research", POOL_UID), id="namespace"),
        pytest.param(lambda: render_resource_flavor(H100), id="flavor"),
        pytest.param(lambda: render_cluster_queue(POOL, QUOTA, H100), id="cluster-queue"),
        pytest.param(lambda: render_local_queue(POOL), id="local-queue"),
        pytest.param(render_priority_classes, id="priority-classes"),
    ],
)
def test_rendering_twice_gives_identical_manifests_and_declares_no_status(render: object) -> None:
    assert callable(render)
    first, second = render(), render()

    assert first == second
    assert repr(first) == repr(second)  # same key order too: applies are byte-identical
    for manifest in first if isinstance(first, list) else [first]:
        assert "status" not in manifest
        assert manifest["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "aicp"


def test_cluster_queue_names_are_injective_where_the_plain_join_was_not() -> None:
    first = PoolIdentity(project="cq-a", pool="b-c", accelerator_class="h100-80g", uid=POOL_UID)
    second = PoolIdentity(project="cq-a-b", pool="c", accelerator_class="h100-80g", uid=POOL_UID)
    assert first.legacy_cluster_queue == second.legacy_cluster_queue == "aicp-cq-a-b-c"
    assert (first.cluster_queue, second.cluster_queue) == ("aicp-cq--a-b-c", "aicp-cq--a--b-c")


def test_queues_carry_the_pool_id_that_makes_them_its_own() -> None:
    queue = render_cluster_queue(POOL, Quota(accelerators=1, cpu="1", memory="1Gi"), H100)
    assert queue["metadata"]["labels"]["aicp.dev/uid"] == POOL_UID
    assert render_local_queue(POOL)["metadata"]["labels"]["aicp.dev/uid"] == POOL_UID
