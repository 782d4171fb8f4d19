"""Derived Kubernetes names: deterministic, within 63 characters, as in docs/DESIGN.md §6."""

from __future__ import annotations

import re

import pytest

from app.domain import naming

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def test_short_names_are_the_documented_ones() -> None:
    assert naming.namespace_for("research") == "aicp-research"
    assert naming.cluster_queue_name("research", "h100-pool") == "aicp-research-h100-pool"
    assert naming.local_queue_name("h100-pool") == "h100-pool"
    uid = "3f2a1c4d-0000-4000-8000-000000000000"
    assert naming.job_name("train-7b", uid, 1) == "train-7b-3f2a1c-g1"


@pytest.mark.parametrize(
    ("project", "pool"),
    [
        pytest.param("p" * 30, "q" * 30, id="both-at-max"),
        pytest.param("a" * 28 + "-b", "c" * 30, id="dash-at-cut"),
    ],
)
def test_long_cluster_queue_names_are_hash_shortened_to_a_valid_label(
    project: str, pool: str
) -> None:
    name = naming.cluster_queue_name(project, pool)
    assert len(name) <= 63 and DNS_LABEL.match(name)
    assert name == naming.cluster_queue_name(project, pool)
    assert name != naming.cluster_queue_name(project, pool[:-1] + "x")


def test_job_names_stay_valid_for_the_longest_workload() -> None:
    name = naming.job_name("w" * 40, "abcdef12-0000", 123456)
    assert name == "w" * 40 + "-abcdef-g123456" and DNS_LABEL.match(name)
