"""aicp's ClusterRole exactly as the Helm chart renders it (Helm bundled by helm-python-sdk)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

CHART_DIR = Path(__file__).resolve().parents[1] / "chart" / "aicp"


def chart_cluster_role() -> dict[str, Any]:
    """The ClusterRole of `helm install aicp chart/aicp` with the least values it needs."""
    values = {"secret": {"databaseUrl": "postgresql://aicp@db.invalid:5432/aicp"}}
    with helm.Chart.load(CHART_DIR) as chart:
        files = chart.render(values, name="aicp", namespace="aicp-system", is_install=True)
    for path, text in files.items():
        if path.endswith("clusterrole.yaml"):
            for doc in yaml.safe_load_all(text):
                if doc and doc.get("kind") == "ClusterRole":
                    role: dict[str, Any] = doc
                    return role
    raise LookupError("the chart renders no ClusterRole")
