"""Render the aicp chart offline (helm-python-sdk bundles Helm) and index what comes out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

from tests.chart.kube_calls import Attribute, granted_by

CHART_DIR = Path(__file__).resolve().parents[2] / "chart" / "aicp"
RELEASE = "aicp"
NAMESPACE = "aicp-system"

# The values sets CI renders. "default" adds only what the chart cannot default: a database.
DATABASE_URL = "postgresql://aicp:s3cret-db-password@db.example.internal:5432/aicp"
ADMIN_TOKEN = "admin-token-that-must-never-be-inlined"
DEFAULT_VALUES: dict[str, Any] = {"secret": {"databaseUrl": DATABASE_URL}}
HA_VALUES: dict[str, Any] = {
    "replicaCount": 3,
    "secret": {"databaseUrl": DATABASE_URL, "adminToken": ADMIN_TOKEN},
    "metrics": {"serviceMonitor": {"enabled": True}},
    "networkPolicy": {
        "enabled": True,
        "ingressFrom": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gateway"}}}
        ],
        "egress": {"database": {"cidrs": ["10.20.0.0/16"]}},
    },
}
EXISTING_SECRET_VALUES: dict[str, Any] = {
    "secret": {
        "existingSecret": "aicp-credentials",
        "databaseUrlKey": "url",
        "adminTokenKey": "token",
    },
}


@dataclass(frozen=True)
class Rendered:
    """Every manifest of one render, in template order, and NOTES.txt."""

    manifests: list[dict[str, Any]]
    notes: str

    def all_of(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.manifests if m["kind"] == kind]

    def one(self, kind: str) -> dict[str, Any]:
        found = self.all_of(kind)
        assert len(found) == 1, f"expected one {kind}, rendered {len(found)}"
        return found[0]

    @property
    def container(self) -> dict[str, Any]:
        containers: list[dict[str, Any]] = self.one("Deployment")["spec"]["template"]["spec"][
            "containers"
        ]
        assert [c["name"] for c in containers] == ["aicp"]
        return containers[0]

    @property
    def env(self) -> dict[str, dict[str, Any]]:
        return {e["name"]: e for e in self.container["env"]}


def render(values: dict[str, Any]) -> Rendered:
    """Render as `helm install aicp chart/aicp -n aicp-system` would (schema checked first)."""
    with helm.Chart.load(CHART_DIR) as chart:
        files = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    manifests: list[dict[str, Any]] = []
    notes = ""
    for path, text in sorted(files.items()):
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        manifests.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return Rendered(manifests=manifests, notes=notes)


def granted() -> set[Attribute]:
    """What the ClusterRole of a default install allows."""
    return granted_by(render(DEFAULT_VALUES).one("ClusterRole"))
