"""Settings from the environment (docs/DESIGN.md §9), validated once at startup.

Beyond §9: `AICP_KUBE_WRITE_QPS` (50) and `AICP_KUBE_WRITE_BURST` (100) set the Kubernetes
write rate limit (`app.kube.client.KubeSettings`); `AICP_RECOVERY_TIMEOUT_SECONDS` (60) is how
long the doorbell's LISTEN connection or an informer may stay down before the process exits
(`app.supervision`); `AICP_EVENT_RETENTION_DAYS` (90) and `AICP_TOMBSTONE_RETENTION_DAYS` (30)
how long events and tombstones are kept (`app.store.retention`; 0 keeps them forever);
`AICP_FORECAST_RETENTION_DAYS` (30) how long the estimates of queued workloads' starts are kept
after they were scored (`workload_forecasts`, the history of `.../forecast-accuracy`);
`AICP_TOKEN_CACHE_SIZE` (10000) how many valid project tokens each replica keeps in memory
(`app.store.token_cache`; 0: every request reads its token from the database).
`AICP_DB_RECONCILE_POOL_SIZE` (8) is the size of the reconcile workers' own connection pool,
apart from the `AICP_DB_POOL_SIZE` connections the API and the streams use, so a request never
queues behind reconcile steps for a connection.
`AICP_NAMESPACE` (`aicp-system`) is the namespace aicp runs in: the project whose namespace
would be that one is a reserved name (`app.domain.naming.reserved_project_problem`).
`AICP_STREAM_*` and `AICP_STREAMS_*` set the live streams (`app.streams.changefeed.FeedConfig`).
`AICP_TOKENS_PER_PROJECT` (1000) caps a project's live tokens (`app.store.tokens`).
`AICP_WORKLOAD_START_DEADLINE_SECONDS` (3600) is the start deadline of a workload whose spec
names none (`start_deadline_seconds`, filled in on submission by `app.api.workloads`).
`AICP_HTTP_MAX_*` and `AICP_HTTP_*_TIMEOUT_SECONDS` bound what one HTTP client may cost
(`app.api.http_limits.HttpLimits`).
`AICP_OIDC_*` let people sign in through an OpenID Connect provider (`app.identity`,
docs/OPERATIONS.md "Single sign-on"): `AICP_OIDC_ISSUER` (unset: API tokens only) and
`AICP_OIDC_AUDIENCE` (required with it), `AICP_OIDC_USERNAME_CLAIM` (`preferred_username`),
`AICP_OIDC_GROUPS_CLAIM` (`groups`), `AICP_OIDC_ALGORITHMS` (`RS256,PS256,ES256`; asymmetric
only), `AICP_OIDC_LEEWAY_SECONDS` (30, at most 300), `AICP_OIDC_KEYS_REFRESH_SECONDS` (30: an
unknown key id refetches the issuer's keys at most this often), `AICP_OIDC_ADMIN_GROUPS`
(comma-separated groups whose members are platform admins, beside the role bindings),
`AICP_OIDC_CLI_CLIENT_ID` (`aicp-cli`: the client `aicp login --oidc` uses) and
`AICP_OIDC_DASHBOARD_CLIENT_ID` (`aicp-dashboard`: the dashboard's single sign-on).
`AICP_RATE_*` are the request rate limits (`app.api.ratelimit`), `AICP_LOG_FOLLOWS_*` the
limits on open log follows (`app.streams.follows`), each replica's own (docs/RELIABILITY.md
"Tenants and clients").

``Settings.from_env`` either returns a complete, valid settings object or raises
``ConfigError`` whose message is one line per bad variable, naming it, the value (hidden for
secrets) and what is expected. ``python -m app serve`` prints that and exits with status 2.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from app.domain.naming import DEFAULT_INSTALL_NAMESPACE
from app.domain.specs import DEFAULT_START_DEADLINE_SECONDS, MAX_START_DEADLINE_SECONDS
from app.identity.verifier import ASYMMETRIC_ALGORITHMS, DEFAULT_ALGORITHMS, MAX_LEEWAY_SECONDS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

T = TypeVar("T")

LogFormat = Literal["json", "console"]
MIN_ADMIN_TOKEN_LENGTH = 16
DEFAULT_TOKENS_PER_PROJECT = 1000


class ConfigError(ValueError):
    """One or more environment variables are invalid; the message has a line for each."""


def _int_between(low: int, high: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(raw)
        if not low <= value <= high:
            raise ValueError(raw)
        return value

    return parse


def _positive_seconds(raw: str) -> float:
    value = float(raw)
    if not 0 < value < float("inf"):  # also rejects NaN
        raise ValueError(raw)
    return value


def _positive_rate(raw: str) -> float:
    return _positive_seconds(raw)  # the same rule: a finite number above zero


def _log_format(raw: str) -> LogFormat:
    if raw == "json":
        return "json"
    if raw == "console":
        return "console"
    raise ValueError(raw)


def _database_url(raw: str) -> str:
    if not raw.startswith(("postgresql://", "postgres://")):
        raise ValueError(raw)
    return raw


def _namespace(raw: str) -> str:
    if len(raw) > 63 or re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", raw) is None:
        raise ValueError(raw)
    return raw


def _issuer(raw: str) -> str:
    if not raw.startswith(("https://", "http://")) or raw.endswith("/") or " " in raw:
        raise ValueError(raw)
    return raw


def _names(raw: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(part.strip() for part in raw.split(",") if part.strip()))
    if not names:
        raise ValueError(raw)
    return names


def _algorithms(raw: str) -> tuple[str, ...]:
    names = _names(raw)
    if any(name not in ASYMMETRIC_ALGORITHMS for name in names):
        raise ValueError(raw)
    return names


def _admin_token(raw: str) -> str:
    if len(raw) < MIN_ADMIN_TOKEN_LENGTH or raw.strip() != raw:
        raise ValueError(raw)
    return raw


class _Reader:
    """Reads variables, collecting one problem line per bad value instead of stopping."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.problems: list[str] = []
        self.invalid: set[str] = set()

    def read(
        self,
        name: str,
        default: T,
        parse: Callable[[str], T],
        expected: str,
        *,
        secret: bool = False,
    ) -> T:
        raw = self.env.get(name)
        if raw is None or raw == "":
            return default
        try:
            return parse(raw)
        except ValueError:
            shown = "(hidden)" if secret else repr(raw)
            self.problems.append(f"{name}={shown} is invalid: expected {expected}")
            self.invalid.add(name)
            return default

    def fields(
        self, cls: type[Settings], variables: Iterable[tuple[str, str, Callable[[str], Any], str]]
    ) -> dict[str, Any]:
        """Each `(field, variable, parse, expected)` read, its default the field's in `cls`."""
        return {
            field: self.read(name, getattr(cls, field), parse, expected)
            for field, name, parse, expected in variables
        }

    def require(self, name: str, value: object, expected: str) -> None:
        if value is None and name not in self.invalid:
            self.problems.append(f"{name} is not set: expected {expected}")


@dataclass(frozen=True)
class Settings:
    """Everything the service reads from its environment."""

    database_url: str | None
    kubeconfig: str | None
    instance_id: str
    http_host: str  # its default depends on dev mode (from_env)
    admin_token: str | None
    log_format: LogFormat  # its default depends on dev mode (from_env)
    dev_mode: bool = False
    http_port: int = 8080
    lease_ttl_seconds: float = 15.0
    sweep_interval_seconds: float = 1.0
    workers: int = 16
    db_pool_size: int = 10
    # The reconcile workers' own connections, apart from the API's `db_pool_size`
    # (app.store.db.Database; docs/RELIABILITY.md "Tenants and clients").
    db_reconcile_pool_size: int = 8
    kube_write_qps: float = 50.0
    kube_write_burst: int = 100
    recovery_timeout_seconds: float = 60.0
    event_retention_days: int = 90
    tombstone_retention_days: int = 30
    forecast_retention_days: int = 30
    token_cache_size: int = 10_000
    stream_heartbeat_seconds: float = 15.0
    streams_max: int = 2000
    streams_per_token: int = 50
    stream_buffer_bytes: int = 1 << 20
    stream_history_seconds: float = 3600.0
    tokens_per_project: int = DEFAULT_TOKENS_PER_PROJECT
    http_max_head_bytes: int = 65536
    http_max_request_line_bytes: int = 8192
    http_max_headers: int = 100
    http_head_timeout_seconds: float = 10.0
    http_body_timeout_seconds: float = 30.0
    http_max_connections: int = 4096
    streams_per_project: int = 500
    # Request rate limits, per replica (app.api.ratelimit): per second, 0 turns one off.
    rate_reads_per_token: float = 200.0
    rate_writes_per_token: float = 10.0
    rate_reads_per_project: float = 500.0
    rate_writes_per_project: float = 20.0
    rate_auth_failures_per_client: float = 10.0
    rate_burst_seconds: float = 5.0
    # Pod log follows open at once (app.streams.follows); the replica's limit is also the size of
    # their own Kubernetes connection pool.
    log_follows_max: int = 32
    log_follows_per_token: int = 4
    log_follows_per_project: int = 8
    install_namespace: str = DEFAULT_INSTALL_NAMESPACE
    workload_start_deadline_seconds: int = DEFAULT_START_DEADLINE_SECONDS
    # The namespace (an ingress controller's) whose pods may reach every inference service
    # besides the service's own project's; none: only the project's own pods.
    service_ingress_namespace: str | None = None
    # Single sign-on (app.identity); no issuer: API tokens only.
    oidc_issuer: str | None = None
    oidc_audience: str | None = None
    oidc_username_claim: str = "preferred_username"
    oidc_groups_claim: str = "groups"
    oidc_algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    oidc_leeway_seconds: int = 30
    oidc_keys_refresh_seconds: float = 30.0
    oidc_admin_groups: tuple[str, ...] = ()
    oidc_cli_client_id: str = "aicp-cli"
    oidc_dashboard_client_id: str = "aicp-dashboard"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, dev_mode: bool = False) -> Settings:
        """Read and check every variable. In dev mode DATABASE_URL and AICP_ADMIN_TOKEN may be
        unset (dev mode supplies an embedded database and a generated token)."""
        reader = _Reader(os.environ if env is None else env)
        read = reader.read
        token_rule = f"at least {MIN_ADMIN_TOKEN_LENGTH} characters, no surrounding spaces"
        settings = cls(
            database_url=read(
                "DATABASE_URL", None, _database_url, "a postgresql:// URL", secret=True
            ),
            kubeconfig=reader.env.get("KUBECONFIG") or None,
            instance_id=read("AICP_INSTANCE_ID", default_instance_id(), str, "a name"),
            http_host=read("AICP_HTTP_HOST", "127.0.0.1" if dev_mode else "0.0.0.0", str, "a host"),
            admin_token=read("AICP_ADMIN_TOKEN", None, _admin_token, token_rule, secret=True),
            log_format=read(
                "AICP_LOG_FORMAT",
                "console" if dev_mode else "json",
                _log_format,
                "'json' or 'console'",
            ),
            dev_mode=dev_mode,
            **reader.fields(cls, _VARIABLES),
        )
        if not dev_mode:
            reader.require("DATABASE_URL", settings.database_url, "a postgresql:// URL")
            reader.require(
                "AICP_ADMIN_TOKEN",
                settings.admin_token,
                f"the platform admin's bearer token ({token_rule})",
            )
        if settings.oidc_issuer is not None:
            reader.require(
                "AICP_OIDC_AUDIENCE",
                settings.oidc_audience,
                "the audience (aud) aicp's access tokens carry, with AICP_OIDC_ISSUER",
            )
        if reader.problems:
            raise ConfigError("\n".join(reader.problems))
        return settings


def _rate_or_off(raw: str) -> float:
    value = float(raw)
    if not 0 <= value < float("inf"):  # also rejects NaN
        raise ValueError(raw)
    return value


_SECONDS = "a positive number of seconds"
_FROM_ONE = "an integer from 1"
_DAYS = "a number of days between 0 (keep forever) and 36500"
_PER_SECOND = "a number of requests per second, 0 for no limit"

#: Every setting whose default is its `Settings` field's: the field, its variable, the parser
#: and what a value must be, in the order a bad value's problem is reported.
_VARIABLES: tuple[tuple[str, str, Callable[[str], Any], str], ...] = (
    # The process and the reconcile engine
    ("http_port", "AICP_HTTP_PORT", _int_between(0, 65535), "an integer port between 0 and 65535"),
    ("lease_ttl_seconds", "AICP_LEASE_TTL_SECONDS", _positive_seconds, _SECONDS),
    ("sweep_interval_seconds", "AICP_SWEEP_INTERVAL_SECONDS", _positive_seconds, _SECONDS),
    ("workers", "AICP_WORKERS", _int_between(1, 1024), "an integer between 1 and 1024"),
    ("db_pool_size", "AICP_DB_POOL_SIZE", _int_between(1, 1000), "an integer between 1 and 1000"),
    (
        "db_reconcile_pool_size",
        "AICP_DB_RECONCILE_POOL_SIZE",
        _int_between(1, 1000),
        "an integer between 1 and 1000",
    ),
    (
        "kube_write_qps",
        "AICP_KUBE_WRITE_QPS",
        _positive_rate,
        "a positive number of Kubernetes writes per second",
    ),
    (
        "kube_write_burst",
        "AICP_KUBE_WRITE_BURST",
        _int_between(1, 100_000),
        "an integer between 1 and 100000",
    ),
    ("recovery_timeout_seconds", "AICP_RECOVERY_TIMEOUT_SECONDS", _positive_seconds, _SECONDS),
    # Retention and the token cache
    ("event_retention_days", "AICP_EVENT_RETENTION_DAYS", _int_between(0, 36500), _DAYS),
    ("tombstone_retention_days", "AICP_TOMBSTONE_RETENTION_DAYS", _int_between(0, 36500), _DAYS),
    ("forecast_retention_days", "AICP_FORECAST_RETENTION_DAYS", _int_between(0, 36500), _DAYS),
    (
        "token_cache_size",
        "AICP_TOKEN_CACHE_SIZE",
        _int_between(0, 10_000_000),
        "a number of project tokens between 0 (no cache) and 10000000",
    ),
    # Live streams
    ("stream_heartbeat_seconds", "AICP_STREAM_HEARTBEAT_SECONDS", _positive_seconds, _SECONDS),
    ("streams_max", "AICP_STREAMS_MAX", _int_between(1, 1_000_000), _FROM_ONE),
    ("streams_per_token", "AICP_STREAMS_PER_TOKEN", _int_between(1, 1_000_000), _FROM_ONE),
    (
        "stream_buffer_bytes",
        "AICP_STREAM_BUFFER_BYTES",
        _int_between(4096, 1 << 30),
        "a number of bytes between 4096 and 1073741824",
    ),
    ("stream_history_seconds", "AICP_STREAM_HISTORY_SECONDS", _positive_seconds, _SECONDS),
    (
        "tokens_per_project",
        "AICP_TOKENS_PER_PROJECT",
        _int_between(1, 1_000_000),
        "an integer between 1 and 1000000",
    ),
    # What one HTTP client may cost
    (
        "http_max_head_bytes",
        "AICP_HTTP_MAX_HEAD_BYTES",
        _int_between(1024, 1 << 24),
        "a number of bytes between 1024 and 16777216",
    ),
    (
        "http_max_request_line_bytes",
        "AICP_HTTP_MAX_REQUEST_LINE_BYTES",
        _int_between(256, 1 << 24),
        "a number of bytes between 256 and 16777216",
    ),
    (
        "http_max_headers",
        "AICP_HTTP_MAX_HEADERS",
        _int_between(8, 10_000),
        "an integer between 8 and 10000",
    ),
    ("http_head_timeout_seconds", "AICP_HTTP_HEAD_TIMEOUT_SECONDS", _positive_seconds, _SECONDS),
    ("http_body_timeout_seconds", "AICP_HTTP_BODY_TIMEOUT_SECONDS", _positive_seconds, _SECONDS),
    ("http_max_connections", "AICP_HTTP_MAX_CONNECTIONS", _int_between(1, 1_000_000), _FROM_ONE),
    # The limits that keep one tenant or client from crowding out the others
    ("rate_reads_per_token", "AICP_RATE_READS_PER_TOKEN", _rate_or_off, _PER_SECOND),
    ("rate_writes_per_token", "AICP_RATE_WRITES_PER_TOKEN", _rate_or_off, _PER_SECOND),
    ("rate_reads_per_project", "AICP_RATE_READS_PER_PROJECT", _rate_or_off, _PER_SECOND),
    ("rate_writes_per_project", "AICP_RATE_WRITES_PER_PROJECT", _rate_or_off, _PER_SECOND),
    (
        "rate_auth_failures_per_client",
        "AICP_RATE_AUTH_FAILURES_PER_CLIENT",
        _rate_or_off,
        _PER_SECOND,
    ),
    ("streams_per_project", "AICP_STREAMS_PER_PROJECT", _int_between(1, 1_000_000), _FROM_ONE),
    ("log_follows_max", "AICP_LOG_FOLLOWS_MAX", _int_between(1, 1_000_000), _FROM_ONE),
    ("log_follows_per_token", "AICP_LOG_FOLLOWS_PER_TOKEN", _int_between(1, 1_000_000), _FROM_ONE),
    (
        "log_follows_per_project",
        "AICP_LOG_FOLLOWS_PER_PROJECT",
        _int_between(1, 1_000_000),
        _FROM_ONE,
    ),
    ("rate_burst_seconds", "AICP_RATE_BURST_SECONDS", _positive_seconds, _SECONDS),
    # Namespaces and workloads
    (
        "install_namespace",
        "AICP_NAMESPACE",
        _namespace,
        "a namespace name (a DNS-1123 label of at most 63 characters)",
    ),
    (
        "service_ingress_namespace",
        "AICP_SERVICE_INGRESS_NAMESPACE",
        _namespace,
        "a namespace name (a DNS-1123 label of at most 63 characters)",
    ),
    (
        "workload_start_deadline_seconds",
        "AICP_WORKLOAD_START_DEADLINE_SECONDS",
        _int_between(1, MAX_START_DEADLINE_SECONDS),
        f"a number of seconds between 1 and {MAX_START_DEADLINE_SECONDS}",
    ),
    # Single sign-on (app.identity)
    ("oidc_issuer", "AICP_OIDC_ISSUER", _issuer, "an http(s):// issuer URL without a trailing /"),
    ("oidc_audience", "AICP_OIDC_AUDIENCE", str, "an audience"),
    ("oidc_username_claim", "AICP_OIDC_USERNAME_CLAIM", str, "a claim name"),
    ("oidc_groups_claim", "AICP_OIDC_GROUPS_CLAIM", str, "a claim name"),
    (
        "oidc_algorithms",
        "AICP_OIDC_ALGORITHMS",
        _algorithms,
        "comma-separated asymmetric JWS algorithms (" + ", ".join(ASYMMETRIC_ALGORITHMS) + ")",
    ),
    (
        "oidc_leeway_seconds",
        "AICP_OIDC_LEEWAY_SECONDS",
        _int_between(0, MAX_LEEWAY_SECONDS),
        f"a number of seconds between 0 and {MAX_LEEWAY_SECONDS}",
    ),
    ("oidc_keys_refresh_seconds", "AICP_OIDC_KEYS_REFRESH_SECONDS", _positive_seconds, _SECONDS),
    ("oidc_admin_groups", "AICP_OIDC_ADMIN_GROUPS", _names, "comma-separated group names"),
    ("oidc_cli_client_id", "AICP_OIDC_CLI_CLIENT_ID", str, "an OAuth client id"),
    ("oidc_dashboard_client_id", "AICP_OIDC_DASHBOARD_CLIENT_ID", str, "an OAuth client id"),
)


def default_instance_id() -> str:
    """Hostname plus a random suffix: unique per process even for replicas on one host."""
    return f"{socket.gethostname()}-{secrets.token_hex(3)}"
