"""Completion indexes of Indexed Jobs, as the Job controller keeps them: the pod annotation and
label `batch.kubernetes.io/job-completion-index`, and the interval lists of
`status.completedIndexes` / `status.failedIndexes` (`"0-2,5"`)."""

from __future__ import annotations

from typing import Any

INDEX_KEY = "batch.kubernetes.io/job-completion-index"
FAILURE_COUNT_KEY = "batch.kubernetes.io/job-index-failure-count"


def pod_index(pod: dict[str, Any]) -> int | None:
    """The completion index a pod runs, from its annotation (None when absent or not a number)."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(INDEX_KEY)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def parse_intervals(text: str | None) -> set[int]:
    """`"0-2,5"` → {0, 1, 2, 5}; an empty or missing list is the empty set."""
    out: set[int] = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return out


def format_intervals(indexes: set[int]) -> str | None:
    """{0, 1, 2, 5} → `"0-2,5"`, as the controller writes it (None for no index)."""
    if not indexes:
        return None
    ordered = sorted(indexes)
    parts, start, prev = [], ordered[0], ordered[0]
    for value in [*ordered[1:], None]:
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if value is not None:
            start = prev = value
    return ",".join(parts)
