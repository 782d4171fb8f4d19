"""Request bodies: every invalid field reported once, by dotted path, in plain words."""

from __future__ import annotations

import pytest

from app.api.field_errors import humanize
from app.api.validation import decode_body
from app.domain.errors import MalformedJson, PayloadTooLarge, ValidationFailed
from app.domain.specs import NAME_PATTERN, PRINTABLE_PATTERN, BindingPut, PoolCreate, WorkloadSpec


def errors_of(raw: bytes, struct: type) -> dict[str, str]:
    with pytest.raises(ValidationFailed) as raised:
        decode_body(raw, struct)
    return {error.field: error.message for error in raised.value.errors}


def test_a_typo_in_a_field_name_is_reported_as_that_unknown_field() -> None:
    errors = errors_of(
        b'{"name": "a", "compute_pool": "p", "image": "i", "replica": 2}', WorkloadSpec
    )
    assert errors == {"replica": "unknown field"}


def test_several_invalid_fields_are_reported_together() -> None:
    errors = errors_of(
        b'{"name": "a", "compute_pool": "p", "image": "i", "accelerators": 65, '
        b'"replicas": 0, "priority": "urgent", "replica": 1}',
        WorkloadSpec,
    )
    assert errors == {
        "accelerators": "must be at most 64",
        "replicas": "must be at least 1",
        "priority": "must be one of low, normal, high",
        "replica": "unknown field",
    }


def test_nested_fields_are_named_by_dotted_path() -> None:
    errors = errors_of(
        b'{"name": "p", "accelerator_class": "h100", "quota": {"accelerators": -1, '
        b'"cpu": "1", "memory": "1Gi", "gpus": 2}}',
        PoolCreate,
    )
    assert errors == {"quota.accelerators": "must be at least 0", "quota.gpus": "unknown field"}


def test_schema_and_rule_violations_are_reported_in_one_answer() -> None:
    errors = errors_of(
        b'{"name": "aicp-x", "compute_pool": "p", "image": "Bad Image", "cpu": "lots", '
        b'"memory": "1Ei", "replicas": 0, "labels": {"kueue.x-k8s.io/queue-name": "q"}, '
        b'"env": {"AICP_X": "1"}}',
        WorkloadSpec,
    )
    assert set(errors) == {
        "name", "image", "cpu", "memory", "replicas", "labels.kueue.x-k8s.io/queue-name",
        "env.AICP_X",
    }  # fmt: skip
    assert not any("^" in message or "`" in message for message in errors.values())


def test_every_invalid_toleration_field_is_named() -> None:
    errors = errors_of(
        b'{"resource_name": "cpu", "flavor": "f", "tolerations": [{"effect": "Often"}, '
        b'{"operator": "Maybe", "key": 3}]}',
        BindingPut,
    )
    assert errors == {
        "resource_name": errors["resource_name"],
        "tolerations.0.effect": "must be one of NoSchedule, PreferNoSchedule, NoExecute",
        "tolerations.1.operator": "must be one of Exists, Equal",
        "tolerations.1.key": "must be a string or null, got an integer",
    }


def test_missing_required_fields_are_each_named() -> None:
    assert errors_of(b"{}", WorkloadSpec) == {
        "name": "is required",
        "compute_pool": "is required",
        "image": "is required",
    }


def test_broken_json_is_malformed_and_oversized_bodies_are_too_large() -> None:
    with pytest.raises(MalformedJson):
        decode_body(b'{"name": ', WorkloadSpec)
    with pytest.raises(PayloadTooLarge):
        decode_body(b" " * (256 * 1024 + 1), WorkloadSpec)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Expected `int` <= 64 - at `$.accelerators`", "must be at most 64"),
        ("Expected `str` of length <= 30", "must be at most 30 characters"),
        ("Expected `array` of length <= 64", "must have at most 64 entries"),
        ("Expected `str`, got `int`", "must be a string, got an integer"),
        ("Expected `str | null`, got `array`", "must be a string or null, got an array"),
        (
            f"Expected `str` matching regex {PRINTABLE_PATTERN!r}",
            "must not contain whitespace or control characters",
        ),
        ("Expected `str` matching regex '^x+$'", "has an invalid format"),
        ("Some new library message", "is invalid"),
        (
            f"Expected `str` matching regex {NAME_PATTERN!r}",
            "must be a DNS-1123 label: lowercase letters, digits and '-', starting and ending "
            "with a letter or digit",
        ),
    ],
)
def test_library_messages_read_as_plain_words(message: str, expected: str) -> None:
    assert humanize(message) == expected
