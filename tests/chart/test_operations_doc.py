"""docs/OPERATIONS.md stays true: its examples install, its tables match what ships."""

from __future__ import annotations

import importlib
import re
from itertools import product
from pathlib import Path
from typing import Any

import yaml

from app.observability.metrics import REGISTRY
from tests.chart.kube_calls import Attribute
from tests.chart.rendering import granted, render

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "OPERATIONS.md"


def section(title: str) -> str:
    """The text of one `## ` section."""
    text = DOC.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def table_rows(text: str) -> list[list[str]]:
    """The cells of every markdown table row in `text` (header and rule rows skipped)."""
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("|")
    ]
    return [r for r in rows if not set("".join(r)) <= set("-: ")]


def test_the_h100_values_example_installs() -> None:
    install = section("Install")
    match = re.search(r"`values-h100\.yaml`.*?```yaml\n(.*?)```", install, re.S)
    assert match is not None
    values: dict[str, Any] = yaml.safe_load(match.group(1))

    rendered = render(values)

    assert rendered.one("Deployment")["spec"]["replicas"] == 3
    assert rendered.env["DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == "aicp-credentials"
    assert rendered.one("PodDisruptionBudget")
    assert rendered.one("ServiceMonitor")["metadata"]["labels"]["release"] == (
        "kube-prometheus-stack"
    )
    assert '"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"' in install


#: The API groups of the ClusterRole's rules, as the table's first column names them.
RBAC_GROUPS = {
    "core",
    "batch",
    "apps",
    "policy",
    "networking.k8s.io",
    "autoscaling",
    "kueue.x-k8s.io",
}


def test_the_rbac_table_is_what_the_cluster_role_grants() -> None:
    documented: set[Attribute] = set()
    for cells in table_rows(section("Install")):
        if len(cells) != 3 or cells[0] not in RBAC_GROUPS:
            continue
        group = "" if cells[0] == "core" else cells[0]
        resources = [r.strip() for r in cells[1].split(",")]
        verbs = [v.strip() for v in cells[2].split(",")]
        documented |= {Attribute(group, r, v) for r, v in product(resources, verbs)}

    assert documented == granted()


def test_the_uninstall_steps_remove_only_the_evidence_finalizer() -> None:
    uninstall = section("Uninstall")

    assert "-l app.kubernetes.io/managed-by=aicp" in uninstall
    assert '\\"value\\": \\"aicp.dev/evidence\\"' in uninstall  # the test op guards the index
    assert "--cascade=background" in uninstall


def documented_metrics() -> set[str]:
    rows = table_rows(section("Metrics and alerts"))
    return {m for cells in rows for m in re.findall(r"`(aicp_[a-z_]+)`", cells[0])}


def metric_modules() -> list[str]:
    """The app modules that register metrics in the service registry, found by their source:
    importing them all makes the exported set independent of what other tests imported."""
    return sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in (ROOT / "app").rglob("*.py")
        if "registry=REGISTRY" in path.read_text()
    )


def service_registry() -> Any:
    for module in metric_modules():
        importlib.import_module(module)
    return REGISTRY


def exported_metrics() -> set[str]:
    """Every metric `/metrics` serves, with the `_total` suffix counters are exposed with."""
    names = set()
    for family in service_registry().collect():
        names.add(family.name + ("_total" if family.type == "counter" else ""))
    return names


def test_every_metric_the_service_exports_is_documented_and_nothing_else() -> None:
    exported = exported_metrics()

    assert sorted(exported - documented_metrics()) == [], "exported but not in OPERATIONS.md"
    assert sorted(documented_metrics() - exported) == [], "in OPERATIONS.md but not exported"


def test_the_alerts_use_only_documented_metrics() -> None:
    alerts = section("Metrics and alerts").split("What to alert on", 1)[1]
    used = set(re.findall(r"\b(aicp_[a-z_]+?)(?:_bucket|_count|_sum)?\b", alerts))

    assert used
    assert used <= documented_metrics()


def test_every_exported_metric_has_a_help_text() -> None:
    undocumented = [f.name for f in service_registry().collect() if len(f.documentation) < 10]
    assert undocumented == []
