"""Fixtures shared by every test directory come from tests/support (plugins below)."""

pytest_plugins = [
    "tests.support.hygiene",
    "tests.support.pg_fixtures",
    "tests.support.kube_fixtures",
    "tests.support.service",
    "tests.support.real_cluster",
]
