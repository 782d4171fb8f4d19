"""Fixtures shared by every test directory come from tests/support (plugins below)."""

from hypothesis import settings

pytest_plugins = [
    "tests.support.hygiene",
    "tests.support.pg_fixtures",
    "tests.support.kube_fixtures",
    "tests.support.service",
    "tests.support.real_cluster",
    "tests.support.browser",
]

# Property tests run on a shared, sometimes loaded machine: a per-example deadline would make
# them flaky, and the per-test timeout already bounds them. Examples are not stored between runs.
settings.register_profile("aicp", deadline=None, database=None)
settings.load_profile("aicp")
