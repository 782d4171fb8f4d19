"""One Keycloak in development mode, for `make run-sso` and the tests.

`Keycloak.start()`:

1. finds (or downloads, `idp.distribution`) the distribution and a `java` (`JAVA`, else the
   one on PATH; Keycloak 26 needs Java 17 or newer);
2. starts the JVM itself — the command `bin/kc.sh` would build — in its own process group with
   `PR_SET_PDEATHSIG` (`realcluster.processes`), so it dies with this process even after a
   SIGKILL (`kc.sh` would run Java as a background child that outlives it). Data is in memory
   (`--db=dev-mem`), both ports listen on 127.0.0.1 only, on free ports; Java's temporary files
   and the log are in this instance's directory;
3. waits (with a deadline) for `/health/ready` on the management port; Keycloak's first start
   on a machine rebuilds its Quarkus application (a minute or more) and exits with status 10,
   which means "run me again": that is done once;
4. creates the realm from `idp/dev-realm.json` through the admin REST API (as the bootstrap
   admin, whose password is random per instance) and waits for its discovery document.

`stop()` ends the process group (SIGTERM, then SIGKILL after a grace period).

The realm file is the single source of the demo users: `demo_users()` reads their names,
passwords and groups from it for `make run-sso` to print.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from idp import distribution
from realcluster.processes import Component, ComponentError, Supervisor, free_port

REALM_FILE = Path(__file__).resolve().parent / "dev-realm.json"
START_TIMEOUT_SECONDS = 600.0
#: Keycloak's exit status for "the application was rebuilt; start me again".
REAUGMENTED = 10
ADMIN_USER = "aicp-bootstrap-admin"
_KEY_PROVIDER = "org.keycloak.keys.KeyProvider"


class KeycloakError(Exception):
    """Keycloak could not be found, started or configured; one line naming what failed."""


@dataclass(frozen=True)
class DemoUser:
    username: str
    password: str
    groups: tuple[str, ...]


def demo_users(realm_file: Path = REALM_FILE) -> list[DemoUser]:
    """The realm file's users with their passwords and group names."""
    realm = json.loads(realm_file.read_text())
    users = []
    for user in realm.get("users", []):
        password = next(
            (c["value"] for c in user.get("credentials", []) if c.get("type") == "password"), ""
        )
        groups = tuple(group.rsplit("/", 1)[-1] for group in user.get("groups", []))
        users.append(DemoUser(user["username"], password, groups))
    return users


def find_java() -> str | None:
    """`JAVA`, else `JAVA_HOME/bin/java`, else `java` on PATH; None when there is none."""
    if explicit := os.environ.get("JAVA"):
        return explicit
    if java_home := os.environ.get("JAVA_HOME"):
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file():
            return str(candidate)
    return shutil.which("java")


def _java_argv(java: str, home: Path, tmp: Path, args: list[str], built: bool) -> list[str]:
    """What `bin/kc.sh` runs (its default heap and JVM options), with our temporary dir."""
    opens = [
        f"--add-opens=java.base/{package}=ALL-UNNAMED"
        for package in ("java.util", "java.util.concurrent", "java.security", "java.lang")
    ]
    return [
        java,
        "-Djava.util.concurrent.ForkJoinPool.common.threadFactory="
        "io.quarkus.bootstrap.forkjoin.QuarkusForkJoinWorkerThreadFactory",
        *(["-Dkc.config.built=true"] if built else []),
        "-XX:MetaspaceSize=96M",
        "-XX:MaxMetaspaceSize=256m",
        "-Dfile.encoding=UTF-8",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.security.egd=file:/dev/urandom",
        "-XX:+UseG1GC",
        "-Xms64m",
        "-Xmx512m",
        *opens,
        "--enable-native-access=ALL-UNNAMED",
        "-Duser.language=en",
        "-Duser.country=US",
        f"-Djava.io.tmpdir={tmp}",
        f"-Dkc.home.dir={home}",
        f"-Djboss.server.config.dir={home / 'conf'}",
        "-Djava.util.logging.manager=org.jboss.logmanager.LogManager",
        "-Dpicocli.disable.closures=true",
        "-Dquarkus-log-max-startup-records=10000",
        "-cp",
        str(home / "lib" / "quarkus-run.jar"),
        "io.quarkus.bootstrap.runner.QuarkusEntryPoint",
        *args,
    ]


class Keycloak:
    """A development Keycloak on loopback with the aicp realm (see the module docstring)."""

    def __init__(self, directory: Path | None = None, realm_file: Path = REALM_FILE) -> None:
        self.directory = directory or Path(tempfile.mkdtemp(prefix="aicp-keycloak-"))
        self.realm_file = realm_file
        self.realm: str = json.loads(realm_file.read_text())["realm"]
        self.supervisor = Supervisor(self.directory / "logs", label="keycloak")
        self.port = 0
        self.management_port = 0
        self.admin_password = secrets.token_urlsafe(18)
        self.started_in = 0.0
        self._component: Component | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def issuer(self) -> str:
        return f"{self.url}/realms/{self.realm}"

    @property
    def log(self) -> Path:
        return self.supervisor.logs / "keycloak.log"

    def start(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        began = time.monotonic()
        java = find_java()
        if java is None:
            raise KeycloakError("keycloak: no Java found (set JAVA or JAVA_HOME, or install 17+)")
        try:
            home = distribution.ensure(say=lambda line: print(line, flush=True))
        except distribution.DistributionError as exc:
            raise KeycloakError(str(exc)) from exc
        self.port, self.management_port = free_port(), free_port()
        tmp = self.directory / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        args = [
            "start-dev",
            "--db=dev-mem",
            "--health-enabled=true",
            "--http-host=127.0.0.1",
            f"--http-port={self.port}",
            f"--http-management-port={self.management_port}",
            "--cache=local",
        ]
        env = {
            "KC_BOOTSTRAP_ADMIN_USERNAME": ADMIN_USER,
            "KC_BOOTSTRAP_ADMIN_PASSWORD": self.admin_password,
        }
        deadline = began + timeout
        # One distribution directory serves every instance: its first start rebuilds the
        # application inside it, so starts on one machine take turns until ready.
        with distribution.locked(home.parent):
            built = False
            while True:
                self._component = self.supervisor.start(
                    "keycloak", _java_argv(java, home, tmp, args, built), env
                )
                try:
                    self.supervisor.wait(
                        self._component,
                        self._ready,
                        "/health/ready",
                        max(deadline - time.monotonic(), 1.0),
                    )
                    break
                except ComponentError as exc:
                    code = self._component.process.poll()
                    self.supervisor.components.remove(self._component)
                    if code == REAUGMENTED and not built:
                        built = True
                        continue
                    raise KeycloakError(str(exc)) from exc
        self.import_realm()
        self.started_in = time.monotonic() - began

    def _ready(self) -> bool:
        url = f"http://127.0.0.1:{self.management_port}/health/ready"
        try:
            return httpx.get(url, timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        self.supervisor.stop_all()
        self._component = None

    # The admin REST API (as the bootstrap admin of the master realm).

    def admin_token(self) -> str:
        answer = httpx.post(
            f"{self.url}/realms/master/protocol/openid-connect/token",
            data={
                "grant_type": "password",
                "client_id": "admin-cli",
                "username": ADMIN_USER,
                "password": self.admin_password,
            },
            timeout=60,
        )
        if answer.status_code != 200:
            raise KeycloakError(f"keycloak: admin sign-in failed: {answer.status_code}")
        token: str = answer.json()["access_token"]
        return token

    def admin(self, method: str, path: str, body: Any = None) -> httpx.Response:
        """One admin REST call (`path` under `/admin/realms`); raises on a 4xx/5xx."""
        answer = httpx.request(
            method,
            f"{self.url}/admin/realms{path}",
            json=body,
            headers={"Authorization": f"Bearer {self.admin_token()}"},
            timeout=120,
        )
        if answer.status_code >= 400:
            raise KeycloakError(
                f"keycloak: {method} /admin/realms{path}: {answer.status_code} {answer.text[:200]}"
            )
        return answer

    def import_realm(self) -> None:
        """Create the realm from the file (a fresh instance has only `master`)."""
        self.admin("POST", "", json.loads(self.realm_file.read_text()))
        discovery = f"{self.issuer}/.well-known/openid-configuration"
        if httpx.get(discovery, timeout=60).status_code != 200:
            raise KeycloakError(f"keycloak: no discovery document at {discovery}")

    def signing_kids(self) -> list[str]:
        """The key ids of the realm's active RS256 signing keys."""
        keys = self.admin("GET", f"/{self.realm}/keys").json()["keys"]
        return [
            key["kid"]
            for key in keys
            if key.get("algorithm") == "RS256"
            and key.get("use") == "SIG"
            and key.get("status") == "ACTIVE"
        ]

    def rotate_signing_key(self) -> str:
        """Add a new RS256 signing key and remove every older one; return the new key's kid."""
        realm_id = self.admin("GET", f"/{self.realm}").json()["id"]
        query = urllib.parse.urlencode({"parent": realm_id, "type": _KEY_PROVIDER})
        old = [
            component
            for component in self.admin("GET", f"/{self.realm}/components?{query}").json()
            if component.get("providerId") == "rsa-generated"
        ]
        before = set(self.signing_kids())
        name = f"rsa-{secrets.token_hex(4)}"
        self.admin(
            "POST",
            f"/{self.realm}/components",
            {
                "name": name,
                "providerId": "rsa-generated",
                "providerType": _KEY_PROVIDER,
                "parentId": realm_id,
                "config": {"priority": ["1000"], "algorithm": ["RS256"], "keySize": ["2048"]},
            },
        )
        for component in old:
            self.admin("DELETE", f"/{self.realm}/components/{component['id']}")
        (kid,) = [kid for kid in self.signing_kids() if kid not in before]
        return kid

    # Tokens, the way scripts and tests obtain them in the development realm.

    def password_grant(
        self, username: str, password: str, client_id: str = "aicp-cli"
    ) -> dict[str, Any]:
        answer = httpx.post(
            f"{self.issuer}/protocol/openid-connect/token",
            data={
                "grant_type": "password",
                "client_id": client_id,
                "username": username,
                "password": password,
                "scope": "openid",
            },
            timeout=60,
        )
        if answer.status_code != 200:
            raise KeycloakError(f"keycloak: password grant for {username}: {answer.text[:200]}")
        tokens: dict[str, Any] = answer.json()
        return tokens
