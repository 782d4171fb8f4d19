"""The Deployment controller's arithmetic, as Kubernetes rounds and shares: surge rounded up,
unavailability rounded down, proportional scaling of ReplicaSets during a rollout."""

from __future__ import annotations

import pytest

from kubesim.controllers import rollout
from tests.kubesim.serving_builders import deployment, rolling


def _deployment(replicas: int, surge, unavailable) -> dict:
    body = deployment("web", replicas=replicas, strategy=rolling(surge, unavailable))
    body["metadata"]["uid"] = "u"
    return body


def _rs(name: str, replicas: int, created: str, max_replicas: int | None = None) -> dict:
    annotations = {} if max_replicas is None else {rollout.MAX_REPLICAS: str(max_replicas)}
    return {
        "metadata": {"name": name, "creationTimestamp": created, "annotations": annotations},
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas},
    }


@pytest.mark.parametrize(
    ("replicas", "surge", "unavailable", "expected"),
    [
        pytest.param(10, "25%", "25%", (3, 2), id="25%-of-10"),
        pytest.param(3, "25%", "25%", (1, 0), id="25%-of-3"),
        pytest.param(1, "25%", "25%", (1, 0), id="25%-of-1"),
        pytest.param(4, 0, "10%", (0, 1), id="both-round-to-0"),
        pytest.param(5, 2, 1, (2, 1), id="numbers"),
    ],
)
def test_surge_rounds_up_and_unavailability_down(replicas, surge, unavailable, expected):
    assert rollout.fenceposts(_deployment(replicas, surge, unavailable)) == expected


def test_a_new_replicaset_grows_only_within_the_surge():
    d = _deployment(4, 1, 1)
    old, new = _rs("web-a", 4, "2026-01-01T00:00:00Z"), _rs("web-b", 0, "2026-01-01T00:01:00Z")
    assert rollout.new_rs_replicas(d, [old, new], new) == 1
    old["spec"]["replicas"] = 3
    new["spec"]["replicas"] = 1
    assert rollout.new_rs_replicas(d, [old, new], new) == 2


def test_scaling_during_a_rollout_is_shared_in_proportion():
    # A rollout of 10 (surge 3) caught half way, then scaled to 20 (surge 5).
    d = _deployment(20, "25%", "25%")
    d["status"] = {"replicas": 13}
    old = _rs("web-a", 5, "2026-01-01T00:00:00Z", max_replicas=13)
    new = _rs("web-b", 8, "2026-01-01T00:01:00Z", max_replicas=13)

    sizes = rollout.proportional(d, [old, new])

    assert sum(sizes.values()) == 25
    assert sizes == {"web-a": 10, "web-b": 15}
