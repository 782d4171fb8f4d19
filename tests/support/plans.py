"""Reading PostgreSQL's JSON query plans (`EXPLAIN (FORMAT JSON)`) in the plan tests."""

from __future__ import annotations

from typing import Any


def scans(plan: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(node type, relation, index) of every scan in a JSON plan tree."""
    found = []
    if "Relation Name" in plan:
        found.append((plan["Node Type"], plan["Relation Name"], plan.get("Index Name", "")))
    for child in plan.get("Plans", []):
        found.extend(scans(child))
    return found


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of a JSON plan tree, the root first."""
    found = [plan]
    for child in plan.get("Plans", []):
        found.extend(nodes(child))
    return found
