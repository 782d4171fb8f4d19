"""Latency figures the benchmarks print: percentiles (nearest rank) and a one-line summary."""

from __future__ import annotations

import statistics


def percentile(values: list[float], q: float) -> float:
    """The `q`th percentile (0-100) of `values`, by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def report(title: str, values_ms: list[float], *, width: int = 34, number: str = "7.2f") -> None:
    """One line: `title`, the count, p50, p90, p99, max and mean of `values_ms`."""
    figures = {
        "p50": percentile(values_ms, 50),
        "p90": percentile(values_ms, 90),
        "p99": percentile(values_ms, 99),
        "max": max(values_ms),
        "mean": statistics.fmean(values_ms),
    }
    shown = "  ".join(f"{name}={value:{number}}" for name, value in figures.items())
    print(f"{title:<{width}} n={len(values_ms)}  {shown}", flush=True)
