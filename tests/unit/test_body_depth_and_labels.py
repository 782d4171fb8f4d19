"""Nesting depth is measured before decoding, and 422 metric labels come from a bounded set."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.api.field_labels import field_label, known_fields
from app.api.validation import MAX_JSON_DEPTH, decode_body, json_depth
from app.domain.errors import ValidationFailed
from app.domain.specs import BindingPut, ProjectCreate, WorkloadSpec

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(alphabet='[]{}"\\ab,:'))
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=60,
)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(item) for item in value.values()), default=0)
    return 0


@given(documents)
def test_depth_is_measured_as_the_decoder_would_recurse(document: Any) -> None:
    assert json_depth(json.dumps(document).encode()) == depth(document)


@settings(max_examples=50)
@given(
    st.integers(MAX_JSON_DEPTH + 1, 20_000),
    st.sampled_from("[{"),
    st.sampled_from([ProjectCreate, WorkloadSpec, BindingPut]),
)
def test_a_body_nested_beyond_the_limit_is_a_422_never_a_recursion_error(
    levels: int, bracket: str, body: type[msgspec.Struct]
) -> None:
    inner = "[" * levels + "]" * levels if bracket == "[" else '{"a":' * levels + "1" + "}" * levels
    raw = ('{"name": "x", "labels": ' + inner + "}").encode()
    with pytest.raises(ValidationFailed) as raised:
        decode_body(raw, body)
    assert raised.value.errors[0].field == "body"
    assert "nest" in raised.value.errors[0].message


def test_brackets_inside_strings_do_not_count() -> None:
    raw = json.dumps({"name": "x", "display_name": "[" * 150}).encode()
    assert decode_body(raw, ProjectCreate).display_name == "[" * 150


@given(st.text(), st.text())
def test_any_field_path_maps_to_a_known_label(field: str, message: str) -> None:
    assert field_label(field, message) in known_fields()


@given(
    st.dictionaries(st.text(min_size=1, max_size=40), st.text(max_size=5), min_size=1, max_size=20)
)
def test_labels_chosen_by_users_never_become_label_values(labels: dict[str, str]) -> None:
    raw = json.dumps(
        {"name": "x", "compute_pool": "p", "image": "i", "env": labels, "labels": labels}
    ).encode()
    try:
        spec = decode_body(raw, WorkloadSpec)
    except ValidationFailed as failed:
        values = {field_label(e.field, e.message) for e in failed.errors}
    else:
        from app.domain.validation import check_workload

        values = {field_label(field, message) for field, message in check_workload(spec)}
    assert values <= {"env", "labels", "(unknown field)", "(other)"}
    assert len(known_fields()) < 100
