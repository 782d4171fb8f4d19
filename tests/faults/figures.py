"""Measured figures of the fault scenarios: printed, and appended as JSON lines to the file
named by `AICP_FAULTS_FIGURES` when set (docs/RELIABILITY.md quotes them)."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path


def record(scenario: str, **figures: float | int | str) -> None:
    line = {"scenario": scenario, **figures}
    print(f"\nfigures {json.dumps(line)}")
    target = os.environ.get("AICP_FAULTS_FIGURES")
    if target:
        with Path(target).open("a") as sink:
            sink.write(json.dumps(line) + "\n")


def p50(values: list[float]) -> float:
    return round(statistics.median(values), 3) if values else 0.0
