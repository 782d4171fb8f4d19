"""AICP_OIDC_* settings: an issuer needs an audience; only asymmetric algorithms; bounded leeway."""

from __future__ import annotations

import pytest

from app.config import ConfigError, Settings

BASE = {"DATABASE_URL": "postgresql://x/y", "AICP_ADMIN_TOKEN": "a" * 20}


def test_without_an_issuer_single_sign_on_is_off() -> None:
    settings = Settings.from_env(BASE)
    assert settings.oidc_issuer is None and settings.oidc_admin_groups == ()


def test_an_issuer_with_its_audience_and_groups_is_read() -> None:
    settings = Settings.from_env(
        {
            **BASE,
            "AICP_OIDC_ISSUER": "https://idp.example/realms/aicp",
            "AICP_OIDC_AUDIENCE": "aicp",
            "AICP_OIDC_ADMIN_GROUPS": "ops, platform ,ops",
            "AICP_OIDC_ALGORITHMS": "ES256,RS256",
        }
    )
    assert settings.oidc_admin_groups == ("ops", "platform")
    assert settings.oidc_algorithms == ("ES256", "RS256")


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"AICP_OIDC_ISSUER": "https://idp.example"}, "AICP_OIDC_AUDIENCE is not set"),
        ({"AICP_OIDC_ISSUER": "https://idp.example/", "AICP_OIDC_AUDIENCE": "a"}, "ISSUER"),
        ({"AICP_OIDC_ISSUER": "idp.example", "AICP_OIDC_AUDIENCE": "a"}, "ISSUER"),
        ({"AICP_OIDC_ALGORITHMS": "RS256,HS256"}, "AICP_OIDC_ALGORITHMS='RS256,HS256'"),
        ({"AICP_OIDC_ALGORITHMS": "none"}, "AICP_OIDC_ALGORITHMS"),
        ({"AICP_OIDC_LEEWAY_SECONDS": "3600"}, "AICP_OIDC_LEEWAY_SECONDS"),
    ],
)
def test_bad_single_sign_on_settings_name_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        Settings.from_env({**BASE, **env})
