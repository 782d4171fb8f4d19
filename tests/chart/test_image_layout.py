"""The final image holds only the venv, `app/` and `sql/`: that must be enough for `serve`.

The image cannot be built here (no container engine), so its layout is reproduced in a
temporary directory, exactly as the Dockerfile's final stage copies it, and the entry point
is run there with this venv's interpreter. kubesim is absent from that layout (and the
simulator is not an installed package), so an accidental import of it by the production path
fails these tests.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def image_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """/app of the final stage: app/ and sql/ only, without bytecode caches."""
    root = tmp_path_factory.mktemp("image") / "app"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "app", root / "app", ignore=ignore)
    shutil.copytree(ROOT / "sql", root / "sql", ignore=ignore)
    return root


def run_in_image(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the venv's python in `root` with the image's environment (nothing inherited)."""
    image_env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "HOME": str(root),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, *args],
        cwd=root,
        env=image_env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_the_layout_has_no_simulator(image_root: Path) -> None:
    result = run_in_image(image_root, "-c", "import kubesim")

    assert result.returncode != 0
    assert "No module named 'kubesim'" in result.stderr


def test_serve_starts_in_the_image_layout_and_names_each_missing_setting(
    image_root: Path,
) -> None:
    result = run_in_image(image_root, "-m", "app", "serve")

    assert result.returncode == 2, result.stderr
    assert "DATABASE_URL is not set" in result.stderr
    assert "AICP_ADMIN_TOKEN is not set" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_queries_and_migrations_are_found_where_the_image_puts_them(
    image_root: Path,
) -> None:
    script = (
        "from app.store.queries import QUERIES; from app.store.migrations import discover;"
        "print(len(QUERIES), len(discover()))"
    )
    result = run_in_image(image_root, "-c", script)

    assert result.returncode == 0, result.stderr
    queries, migrations = map(int, result.stdout.split())
    assert queries > 0
    assert migrations == len(list((ROOT / "sql" / "migrations").glob("*.sql")))
    assert not list(image_root.rglob("__pycache__"))  # PYTHONDONTWRITEBYTECODE holds
