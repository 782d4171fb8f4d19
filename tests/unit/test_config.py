"""Settings from the environment: defaults, and one clear line per bad value."""

from __future__ import annotations

import pytest

from app.config import ConfigError, Settings

GOOD = {"DATABASE_URL": "postgresql://db/aicp", "AICP_ADMIN_TOKEN": "x" * 20}


def test_defaults_follow_the_design() -> None:
    settings = Settings.from_env(GOOD)
    assert settings.http_port == 8080
    assert settings.lease_ttl_seconds == 15
    assert settings.sweep_interval_seconds == 1
    assert settings.workers == 16
    assert settings.db_pool_size == 10
    assert settings.db_reconcile_pool_size == 8
    assert settings.log_format == "json"
    assert settings.instance_id


def test_every_variable_is_read() -> None:
    settings = Settings.from_env(
        {
            **GOOD,
            "KUBECONFIG": "/k",
            "AICP_INSTANCE_ID": "a-1",
            "AICP_HTTP_HOST": "::1",
            "AICP_HTTP_PORT": "9000",
            "AICP_LEASE_TTL_SECONDS": "2.5",
            "AICP_SWEEP_INTERVAL_SECONDS": "0.5",
            "AICP_WORKERS": "4",
            "AICP_DB_POOL_SIZE": "3",
            "AICP_DB_RECONCILE_POOL_SIZE": "5",
            "AICP_LOG_FORMAT": "console",
            "AICP_RECOVERY_TIMEOUT_SECONDS": "90",
            "AICP_TOKENS_PER_PROJECT": "7",
        }
    )
    assert (settings.kubeconfig, settings.instance_id, settings.http_host) == ("/k", "a-1", "::1")
    assert (settings.http_port, settings.workers, settings.db_pool_size) == (9000, 4, 3)
    assert settings.db_reconcile_pool_size == 5
    assert (settings.lease_ttl_seconds, settings.sweep_interval_seconds) == (2.5, 0.5)
    assert settings.log_format == "console"
    assert settings.recovery_timeout_seconds == 90.0
    assert settings.tokens_per_project == 7


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AICP_HTTP_PORT", "70000"),
        ("AICP_HTTP_PORT", "http"),
        ("AICP_LEASE_TTL_SECONDS", "-1"),
        ("AICP_SWEEP_INTERVAL_SECONDS", "nan"),
        ("AICP_WORKERS", "0"),
        ("AICP_DB_POOL_SIZE", "lots"),
        ("AICP_DB_RECONCILE_POOL_SIZE", "0"),
        ("AICP_LOG_FORMAT", "yaml"),
        ("AICP_RECOVERY_TIMEOUT_SECONDS", "0"),
        ("AICP_TOKENS_PER_PROJECT", "0"),
        ("DATABASE_URL", "mysql://db"),
    ],
)
def test_a_bad_value_is_named_in_one_line(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({**GOOD, name: value})
    [line] = str(raised.value).splitlines()
    assert line.startswith(f"{name}=")
    assert "expected" in line


def test_all_bad_values_are_reported_together_and_secrets_are_hidden() -> None:
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({"AICP_ADMIN_TOKEN": "tiny", "AICP_WORKERS": "-3"})
    lines = str(raised.value).splitlines()
    assert len(lines) == 3
    assert "AICP_ADMIN_TOKEN=(hidden) is invalid" in lines[1] or any(
        "AICP_ADMIN_TOKEN=(hidden)" in line for line in lines
    )
    assert "tiny" not in str(raised.value)
    assert any(line.startswith("DATABASE_URL is not set") for line in lines)


def test_dev_mode_needs_neither_a_database_url_nor_an_admin_token() -> None:
    settings = Settings.from_env({}, dev_mode=True)
    assert settings.database_url is None
    assert settings.admin_token is None
    assert settings.http_host == "127.0.0.1"
    assert settings.log_format == "console"
