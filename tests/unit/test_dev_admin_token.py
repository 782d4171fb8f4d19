"""Dev mode's admin token: generated once, private to the user, reused on the next start."""

from __future__ import annotations

import stat
from pathlib import Path

from app.devmode import admin_token


def test_the_dev_admin_token_is_generated_once_and_then_reused(tmp_path: Path) -> None:
    state = tmp_path / ".aicp"
    first = admin_token(state)
    assert len(first) >= 40
    path = state / "admin-token"
    assert path.read_text().strip() == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert admin_token(state) == first


def test_an_empty_token_file_is_replaced_by_a_new_token(tmp_path: Path) -> None:
    (tmp_path / "admin-token").write_text("\n")
    token = admin_token(tmp_path)
    assert token
    assert (tmp_path / "admin-token").read_text().strip() == token
