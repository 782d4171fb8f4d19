"""The limits on open log follows (app/streams/follows.py)."""

from __future__ import annotations

import uuid

import pytest

from app.domain.errors import TooManyStreams
from app.streams.follows import FollowLimits, Follows


def test_follows_are_limited_per_token_per_project_and_per_replica() -> None:
    follows = Follows(FollowLimits(max_follows=5, per_token=2, per_project=3))
    research, other = uuid.uuid4(), uuid.uuid4()
    first = [follows.open_follow("token:a", research) for _ in range(2)]
    with pytest.raises(TooManyStreams) as token_full:
        follows.open_follow("token:a", research)
    assert token_full.value.limit == 2 and "token" in token_full.value.detail
    follows.open_follow("token:b", research)
    with pytest.raises(TooManyStreams) as project_full:
        follows.open_follow("token:c", research)
    assert project_full.value.limit == 3 and "project" in project_full.value.detail
    follows.open_follow("token:d", other)
    follows.open_follow("token:d", other)
    with pytest.raises(TooManyStreams) as replica_full:
        follows.open_follow("token:e", uuid.uuid4())
    assert replica_full.value.limit == 5
    assert follows.open == 5
    for held in first:
        follows.close(held)
    assert follows.open == 3
    follows.open_follow("token:a", research)  # its places came back
