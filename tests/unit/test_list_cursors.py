"""List cursors are opaque and bound to the list that issued them, on generated inputs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.api.paging import Paging
from app.domain.errors import ValidationFailed
from app.store.paging import Position

positions = st.builds(
    Position,
    st.datetimes(timezones=st.just(UTC)),
    st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=63),
)
scopes = st.tuples(st.sampled_from(["workloads", "projects", "tokens"]), st.text(max_size=20))


def refuses(check: object) -> None:
    with pytest.raises(ValidationFailed) as raised:
        check()  # type: ignore[operator]
    assert [(e.field, raised.value.location) for e in raised.value.errors] == [("cursor", "query")]


@given(positions, scopes)
def test_a_cursor_reads_back_in_the_list_that_issued_it(position: Position, scope: tuple) -> None:
    page = Paging("admin-token").list(*scope)
    assert page.after(page.next(position)) == position


@given(positions, scopes, scopes)
def test_another_lists_cursor_is_refused(position: Position, mine: tuple, theirs: tuple) -> None:
    paging = Paging("admin-token")
    cursor = paging.list(*theirs).next(position)
    if mine != theirs:
        refuses(lambda: paging.list(*mine).after(cursor))


@given(positions, st.data())
def test_every_single_character_change_is_refused(position: Position, data: st.DataObject) -> None:
    page = Paging("admin-token").list("workloads", "p1")
    cursor = page.next(position)
    assert cursor is not None
    at = data.draw(st.integers(0, len(cursor) - 1))
    replacement = data.draw(st.sampled_from("AQgw-_.=/+%\x00é").filter(lambda c: c != cursor[at]))
    tampered = cursor[:at] + replacement + cursor[at + 1 :]
    try:
        assert page.after(tampered) == position  # only a base64 padding-bit twin may pass
    except ValidationFailed as exc:
        assert exc.errors[0].field == "cursor"


@settings(max_examples=300)
@given(st.text(max_size=300))
def test_any_text_is_a_cursor_of_this_list_or_a_422(text: str) -> None:
    page = Paging("admin-token").list("projects", None)
    if text:
        refuses(lambda: page.after(text))


def test_replicas_sharing_the_admin_token_accept_each_others_cursors() -> None:
    position = Position(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "abc")
    cursor = Paging("shared-token").list("projects", None).next(position)
    assert Paging("shared-token").list("projects", None).after(cursor) == position
    refuses(lambda: Paging("another-installation").list("projects", None).after(cursor))


def test_without_an_admin_token_each_process_has_its_own_key() -> None:
    position = Position(datetime(2026, 1, 2, tzinfo=UTC), "abc")
    cursor = Paging(None).list("projects", None).next(position)
    refuses(lambda: Paging(None).list("projects", None).after(cursor))
