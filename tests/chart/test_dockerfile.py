"""The Dockerfile lints clean and builds the image the chart expects.

No container engine runs in CI, so the image is never built here: hadolint checks the file
and these tests check its structure (stages, user, entry point, what reaches the final stage).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.chart.rendering import DEFAULT_VALUES, render

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
HADOLINT = Path(sys.executable).with_name("hadolint")


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


def stages() -> list[Stage]:
    """The Dockerfile's stages, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    found: list[Stage] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), " ".join(args.split())
        if keyword == "FROM":
            base, _, alias = args.partition(" AS ")
            found.append(Stage(name=alias.strip(), base=base.strip()))
        elif found:
            found[-1].instructions.append((keyword, args))
    return found


def test_hadolint_finds_nothing_to_complain_about() -> None:
    result = subprocess.run(
        [str(HADOLINT), "--format", "json", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )

    assert json.loads(result.stdout or "[]") == []
    assert result.returncode == 0


def test_the_build_is_multi_stage_with_the_locked_dependencies_installed_in_a_builder() -> None:
    builder = next(s for s in stages() if s.name == "builder")

    syncs = [r for r in builder.all("RUN") if r.startswith("uv sync")]
    assert syncs == ["uv sync --frozen --no-dev --no-group sim --no-install-project"]
    assert any(c.startswith("pyproject.toml uv.lock") for c in builder.all("COPY"))


def test_the_final_stage_is_python_slim_with_only_the_venv_and_the_service_code() -> None:
    final = stages()[-1]

    assert final.base == "${PYTHON_IMAGE}"
    assert "ARG PYTHON_IMAGE=python:3.11-slim-bookworm" in DOCKERFILE.read_text()
    assert final.all("COPY") == [
        "--from=builder /app/.venv /app/.venv",
        "--from=builder /app/app /app/app",
        "--from=builder /app/sql /app/sql",
    ]
    runs = " ".join(final.all("RUN"))
    for build_tool in ("uv ", "pip install", "apt-get", "gcc", "build-essential"):
        assert build_tool not in runs
    assert "pip uninstall --yes --quiet pip setuptools wheel" in runs


def test_the_image_runs_serve_as_the_same_non_root_uid_the_chart_enforces() -> None:
    final = stages()[-1]
    pod = render(DEFAULT_VALUES).one("Deployment")["spec"]["template"]["spec"]

    assert final.all("USER") == ["10001:10001"]
    assert pod["securityContext"]["runAsUser"] == 10001
    assert final.all("ENTRYPOINT") == ['["python", "-m", "app", "serve"]']
    assert final.all("EXPOSE") == ["8080"]
    env = " ".join(final.all("ENV"))
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "PATH=/app/.venv/bin:$PATH" in env
    assert final.all("HEALTHCHECK") == []  # Kubernetes probes /healthz and /readyz instead


def test_the_build_context_is_limited_to_what_the_image_needs() -> None:
    rules = [
        line
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]

    assert rules[0] == "*"
    assert {"!pyproject.toml", "!uv.lock", "!app/", "!sql/"} <= set(rules)
    assert "!kubesim/" not in rules
    assert "!.venv/" not in rules
