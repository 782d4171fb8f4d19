"""Classification: what the cluster's objects say about a workload or a pool (docs/DESIGN.md §7).

Pure functions over the raw objects the informers hold. `classify` gives a workload's state,
reason and evidence (`workload`), `classify_pool` a pool's status from its ClusterQueue
(`pool`); `evidence` gathers and merges the facts both read, and `reasons` holds the
sentences a user sees.
"""

from __future__ import annotations

from app.domain.classify.evidence import (
    ClassifyContext,
    Evidence,
    PoolSnapshot,
    context_for,
    gather_evidence,
    merge_evidence,
)
from app.domain.classify.pool import classify_pool, pool_snapshot
from app.domain.classify.workload import Classification, classify

__all__ = [
    "Classification",
    "ClassifyContext",
    "Evidence",
    "PoolSnapshot",
    "classify",
    "classify_pool",
    "context_for",
    "gather_evidence",
    "merge_evidence",
    "pool_snapshot",
]
