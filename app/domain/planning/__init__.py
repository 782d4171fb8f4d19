"""Planning: where a queued workload stands in its pool's queue, when it will likely be
admitted, and what Kueue would do with a workload submitted now (docs/PLANNING.md)."""
