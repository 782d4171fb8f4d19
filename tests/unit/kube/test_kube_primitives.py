"""The adapter's pure pieces: error translation, the write limiter, the indexed cache."""

from __future__ import annotations

import json
import time

import pytest

from app.kube.cache import ObjectCache
from app.kube.client import TokenBucket
from app.kube.errors import (
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    NotFound,
    TooManyRequests,
    Unavailable,
    from_status,
)


def status(code: int, reason: str, message: str, **details: object) -> bytes:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    body.update(code=code, reason=reason, message=message, details=details)
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("code", "body", "expected"),
    [
        pytest.param(404, status(404, "NotFound", 'jobs.batch "x" not found'), NotFound, id="404"),
        pytest.param(
            409, status(409, "AlreadyExists", 'jobs.batch "x" already exists'), Conflict, id="409"
        ),
        pytest.param(410, status(410, "Expired", "too old resource version"), Gone, id="410"),
        pytest.param(422, status(422, "Invalid", "Job.batch is invalid"), Invalid, id="422"),
        pytest.param(400, status(400, "BadRequest", "bad selector"), Invalid, id="400"),
        pytest.param(429, status(429, "TooManyRequests", "slow down"), TooManyRequests, id="429"),
        pytest.param(500, b"<html>proxy error</html>", Unavailable, id="500-not-json"),
        pytest.param(503, b"", Unavailable, id="503-empty"),
        pytest.param(403, status(403, "Forbidden", "no"), Forbidden, id="403"),
        pytest.param(401, status(401, "Unauthorized", "who"), KubeError, id="401-generic"),
    ],
)
def test_a_kubernetes_status_becomes_the_matching_error(
    code: int, body: bytes, expected: type[KubeError]
) -> None:
    error = from_status(code, body)
    assert type(error) is expected
    assert error.code == code
    assert error.message


def test_an_error_keeps_the_servers_message_causes_and_retry_after() -> None:
    cause = {
        "reason": "FieldManagerConflict",
        "message": 'conflict with "kueue"',
        "field": ".spec.suspend",
    }
    error = from_status(
        409,
        status(409, "Conflict", "Apply failed with 1 conflict", causes=[cause]),
        retry_after="2",
    )
    assert str(error) == "Apply failed with 1 conflict"
    assert error.reason == "Conflict"
    assert error.causes == [cause]
    assert error.retry_after == 2.0


async def test_the_write_limiter_allows_a_burst_then_holds_writes_to_its_rate() -> None:
    bucket = TokenBucket(rate=200.0, burst=5)
    started = time.monotonic()
    for _ in range(5):
        await bucket.acquire()
    burst_took = time.monotonic() - started
    for _ in range(10):
        await bucket.acquire()
    total = time.monotonic() - started
    assert burst_took < 0.02
    # 10 writes past the burst at 200/s need at least 50 ms.
    assert total >= 0.045


def test_the_write_limiter_refuses_a_nonsense_rate() -> None:
    with pytest.raises(ValueError, match="rate"):
        TokenBucket(rate=0, burst=1)


def job(name: str, uid: str | None, namespace: str = "aicp-p") -> dict[str, object]:
    labels = {"aicp.dev/uid": uid} if uid else {}
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}}


def test_the_cache_index_follows_label_changes_and_deletes() -> None:
    cache = ObjectCache()
    cache.put(job("a", "u1"))
    cache.put(job("b", "u1"))
    cache.put(job("c", "u2"))
    assert [o["metadata"]["name"] for o in cache.by_label("aicp.dev/uid", "u1")] == ["a", "b"]

    cache.put(job("b", "u2"))  # relabelled
    cache.pop(("aicp-p", "c"))
    assert [o["metadata"]["name"] for o in cache.by_label("aicp.dev/uid", "u1")] == ["a"]
    assert [o["metadata"]["name"] for o in cache.by_label("aicp.dev/uid", "u2")] == ["b"]
    assert cache.get("aicp-p", "c") is None


def test_a_label_indexed_later_covers_what_is_already_cached() -> None:
    cache = ObjectCache()
    cache.put({"metadata": {"name": "p1", "namespace": "n", "labels": {"job-name": "j"}}})
    with pytest.raises(KeyError, match="not indexed"):
        cache.by_label("job-name", "j")
    cache.index_by_label("job-name")
    assert [o["metadata"]["name"] for o in cache.by_label("job-name", "j")] == ["p1"]


def test_a_computed_index_refiles_an_object_whose_value_changes_and_drops_one_it_leaves_out() -> (
    None
):
    cache = ObjectCache()
    cache.put(job("a", "u1"))
    cache.index_by(
        "first-letter-of-uid",
        lambda o: (o["metadata"]["labels"].get("aicp.dev/uid") or "")[:1] or None,
    )
    cache.put(job("b", "v2"))
    cache.put(job("c", None))
    assert [o["metadata"]["name"] for o in cache.by_index("first-letter-of-uid", "u")] == ["a"]

    cache.put(job("a", "v1"))  # refiled
    cache.put(job("b", None))  # no longer filed
    assert [o["metadata"]["name"] for o in cache.by_index("first-letter-of-uid", "v")] == ["a"]
    assert cache.by_index("first-letter-of-uid", "u") == []
    cache.pop(("aicp-p", "a"))
    assert cache.by_index("first-letter-of-uid", "v") == []
