"""Every bound and rule docs/API.md sets on workload bodies, table-driven.

Schema rules (types, ranges, lengths, patterns, unknown fields) are enforced by msgspec while
decoding `WorkloadSpec`; the rest by `check_workload`. Each case names the field a user would
see in the 422.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from app.domain.specs import WorkloadSpec
from app.domain.validation import check_workload

BASE: dict[str, Any] = {"name": "train-7b", "compute_pool": "h100-pool", "image": "ghcr.io/a/b:1"}


def problems(**changes: Any) -> list[str]:
    """Decode a body like the API does and return the fields it finds wrong ('' = decode)."""
    body = {**BASE, **changes}
    try:
        spec = msgspec.json.decode(msgspec.json.encode(body), type=WorkloadSpec)
    except msgspec.ValidationError as exc:
        return [f"schema: {exc}"]
    return [field for field, _ in check_workload(spec)]


def test_a_minimal_body_gets_api_defaults_filled() -> None:
    spec = msgspec.convert(BASE, WorkloadSpec)
    assert (spec.accelerators, spec.cpu, spec.memory, spec.replicas) == (0, "1", "1Gi", 1)
    assert (spec.max_runtime_seconds, spec.retries, spec.priority) == (86400, 0, "normal")
    assert check_workload(spec) == []


VALID = [
    pytest.param({"accelerators": 0}, id="accelerators-0"),
    pytest.param({"accelerators": 64}, id="accelerators-64"),
    pytest.param({"replicas": 1}, id="replicas-1"),
    pytest.param({"replicas": 64}, id="replicas-64"),
    pytest.param({"max_runtime_seconds": 60}, id="runtime-60s"),
    pytest.param({"max_runtime_seconds": 30 * 86400}, id="runtime-30d"),
    pytest.param({"retries": 10}, id="retries-10"),
    pytest.param({"priority": "low"}, id="priority-low"),
    pytest.param({"priority": "high"}, id="priority-high"),
    pytest.param({"cpu": "500m", "memory": "256Gi"}, id="millicores-and-binary"),
    pytest.param({"cpu": "1.5", "memory": "1e9"}, id="decimal-and-exponent"),
    pytest.param({"env": {f"K{i}": "v" for i in range(64)}}, id="env-64-entries"),
    pytest.param({"env": {"_private": "x", "WANDB_MODE": "offline"}}, id="env-c-identifiers"),
    pytest.param({"labels": {f"k{i}": "v" for i in range(16)}}, id="labels-16"),
    pytest.param({"labels": {"acme.com/team": "nlp", "empty": ""}}, id="labels-prefixed-empty"),
    pytest.param({"labels": {"k": "a" * 63, "b" * 63: "v"}}, id="labels-63-chars"),
    pytest.param(
        {"image": "r.io/" + "a" * 250 + ":" + "t" * 128 + "@sha256:" + "0" * 64},
        id="longest-image-reference",
    ),
    pytest.param({"command": ["x"] * 64, "args": ["y"] * 64}, id="command-args-64"),
    pytest.param({"name": "a" * 40}, id="name-40"),
    pytest.param({"name": "aicp"}, id="name-aicp-without-dash"),
]


@pytest.mark.parametrize("changes", VALID)
def test_bodies_at_every_bound_are_accepted(changes: dict[str, Any]) -> None:
    assert problems(**changes) == []


SCHEMA_INVALID = [
    pytest.param({"accelerators": -1}, "accelerators", id="accelerators-negative"),
    pytest.param({"accelerators": 65}, "accelerators", id="accelerators-65"),
    pytest.param({"accelerators": "8"}, "accelerators", id="accelerators-string"),
    pytest.param({"replicas": 0}, "replicas", id="replicas-0"),
    pytest.param({"replicas": 65}, "replicas", id="replicas-65"),
    pytest.param({"max_runtime_seconds": 59}, "max_runtime_seconds", id="runtime-59s"),
    pytest.param(
        {"max_runtime_seconds": 30 * 86400 + 1}, "max_runtime_seconds", id="runtime-30d+1"
    ),
    pytest.param({"retries": -1}, "retries", id="retries-negative"),
    pytest.param({"retries": 11}, "retries", id="retries-11"),
    pytest.param({"priority": "urgent"}, "priority", id="priority-unknown"),
    pytest.param({"env": {f"K{i}": "v" for i in range(65)}}, "env", id="env-65-entries"),
    pytest.param({"env": {"1BAD": "x"}}, "env", id="env-key-digit-first"),
    pytest.param({"env": {"A-B": "x"}}, "env", id="env-key-dash"),
    pytest.param({"labels": {f"k{i}": "v" for i in range(17)}}, "labels", id="labels-17"),
    pytest.param({"image": "a" * 513}, "image", id="image-513"),
    pytest.param({"image": "has space"}, "image", id="image-whitespace"),
    pytest.param({"image": ""}, "image", id="image-empty"),
    pytest.param({"command": ["x"] * 65}, "command", id="command-65"),
    pytest.param({"args": ["x"] * 65}, "args", id="args-65"),
    pytest.param({"name": "a" * 41}, "name", id="name-41"),
    pytest.param({"name": "Train"}, "name", id="name-uppercase"),
    pytest.param({"name": "-train"}, "name", id="name-leading-dash"),
    pytest.param({"name": "train-"}, "name", id="name-trailing-dash"),
    pytest.param({"name": "tr_ain"}, "name", id="name-underscore"),
    pytest.param({"name": ""}, "name", id="name-empty"),
    pytest.param({"compute_pool": "a" * 31}, "compute_pool", id="pool-name-31"),
    pytest.param({"cpu": 4}, "cpu", id="cpu-number"),
    pytest.param({"replica": 2}, "replica", id="unknown-field-replica"),
]


@pytest.mark.parametrize(("changes", "field"), SCHEMA_INVALID)
def test_schema_violations_name_the_field(changes: dict[str, Any], field: str) -> None:
    found = problems(**changes)
    assert len(found) == 1 and found[0].startswith("schema:")
    assert field in found[0]


@pytest.mark.parametrize("field", ["name", "compute_pool", "image"])
def test_required_fields_are_named_when_missing(field: str) -> None:
    body = {k: v for k, v in BASE.items() if k != field}
    with pytest.raises(msgspec.ValidationError, match=f"`{field}`"):
        msgspec.convert(body, WorkloadSpec)


RULE_INVALID = [
    pytest.param({"name": "aicp-train"}, ["name"], id="reserved-aicp"),
    pytest.param({"name": "kube-train"}, ["name"], id="reserved-kube"),
    pytest.param({"name": "system-train"}, ["name"], id="reserved-system"),
    pytest.param({"cpu": "lots"}, ["cpu"], id="cpu-not-quantity"),
    pytest.param({"cpu": "-1"}, ["cpu"], id="cpu-negative"),
    pytest.param({"cpu": "0"}, ["cpu"], id="cpu-zero"),
    pytest.param({"cpu": "0.0001"}, ["cpu"], id="cpu-below-millicore"),
    pytest.param({"cpu": "1Gb"}, ["cpu"], id="cpu-bad-suffix"),
    pytest.param({"memory": "1GB"}, ["memory"], id="memory-bad-suffix"),
    pytest.param({"memory": " 1Gi"}, ["memory"], id="memory-whitespace"),
    pytest.param({"memory": "0"}, ["memory"], id="memory-zero"),
    pytest.param({"memory": "0.5"}, ["memory"], id="memory-fraction-of-byte"),
    pytest.param({"env": {"AICP_TOKEN": "x"}}, ["env.AICP_TOKEN"], id="env-reserved-prefix"),
    pytest.param({"env": {"aicp_token": "x"}}, ["env.aicp_token"], id="env-reserved-any-case"),
    pytest.param({"labels": {"-bad": "v"}}, ["labels.-bad"], id="label-key-leading-dash"),
    pytest.param({"labels": {"a" * 64: "v"}}, ["labels." + "a" * 64], id="label-name-64"),
    pytest.param({"labels": {"/x": "v"}}, ["labels./x"], id="label-empty-prefix"),
    pytest.param({"labels": {"x/": "v"}}, ["labels.x/"], id="label-empty-name"),
    pytest.param({"labels": {"Acme.com/x": "v"}}, ["labels.Acme.com/x"], id="label-prefix-upper"),
    pytest.param(
        {"labels": {"a" * 254 + "/x": "v"}}, ["labels." + "a" * 254 + "/x"], id="label-prefix-254"
    ),
    pytest.param({"labels": {"aicp.dev/uid": "v"}}, ["labels.aicp.dev/uid"], id="label-aicp"),
    pytest.param(
        {"labels": {"app.kubernetes.io/name": "v"}},
        ["labels.app.kubernetes.io/name"],
        id="label-kubernetes-io",
    ),
    pytest.param({"labels": {"k": "a" * 64}}, ["labels.k"], id="label-value-64"),
    pytest.param({"labels": {"k": "has space"}}, ["labels.k"], id="label-value-space"),
    pytest.param({"labels": {"k": "-v"}}, ["labels.k"], id="label-value-leading-dash"),
]


@pytest.mark.parametrize(("changes", "fields"), RULE_INVALID)
def test_rules_beyond_the_schema_name_the_field(changes: dict[str, Any], fields: list[str]) -> None:
    assert problems(**changes) == fields


def test_every_violation_is_reported_at_once() -> None:
    found = problems(
        name="kube-x",
        cpu="fast",
        memory="0",
        env={"AICP_X": "1"},
        labels={"k": "-"},
    )
    assert found == ["name", "cpu", "memory", "env.AICP_X", "labels.k"]
