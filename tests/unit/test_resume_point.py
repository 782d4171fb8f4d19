"""`Last-Event-ID` parsing: a change number in ASCII digits, or a 422 — never anything else."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.api.watches import resume_point
from app.domain.errors import ValidationFailed

ASCII_DIGITS = frozenset("0123456789")


@given(st.text(max_size=30))
def test_any_header_value_is_a_change_number_or_a_validation_error(raw: str) -> None:
    try:
        parsed = resume_point(raw)
    except ValidationFailed as exc:
        assert exc.errors[0].field == "Last-Event-ID"
        return
    stripped = raw.strip()
    if parsed is None:
        assert stripped == ""
    else:
        assert set(stripped) <= ASCII_DIGITS
        assert parsed == int(stripped)


@pytest.mark.parametrize("raw", ["²", "1²", "٣", "\uff11\uff12", "⁴2", "1_000", "+5", "-1"])
def test_digits_other_than_ascii_are_refused(raw: str) -> None:
    with pytest.raises(ValidationFailed):
        resume_point(raw)


def test_ascii_digits_are_the_change_number() -> None:
    assert resume_point(" 1042 ") == 1042
    assert resume_point(None) is None
