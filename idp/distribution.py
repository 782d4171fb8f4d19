"""The Keycloak distribution, downloaded once into the user's cache.

`org.keycloak:keycloak-quarkus-dist:<VERSION>:zip` comes from Maven Central: straight over
HTTPS when that works, else through `mvn dependency:get -Dtransitive=false` (its resolution of
dependencies would go to a repository this machine may not reach) and copied out of `~/.m2`.
The zip's SHA-1 is checked against the one Maven Central publishes next to it. It is unpacked
into `<cache>/<VERSION>/dist/` (executable bits restored); a second call finds it and does
nothing. Concurrent callers serialize on a lock file, so two test runs never unpack one
distribution at once.

Every failure is one line naming what failed (`DistributionError`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import urllib.request
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

VERSION = "26.7.3"
ARTIFACT = f"org.keycloak:keycloak-quarkus-dist:{VERSION}:zip"
URL = (
    "https://repo1.maven.org/maven2/org/keycloak/keycloak-quarkus-dist/"
    f"{VERSION}/keycloak-quarkus-dist-{VERSION}.zip"
)
DOWNLOAD_TIMEOUT_SECONDS = 900.0


class DistributionError(Exception):
    """The distribution could not be downloaded, checked or unpacked."""


def cache_root() -> Path:
    """`AICP_KEYCLOAK_CACHE`, else `~/.cache/aicp/keycloak` (shared by every clone)."""
    if explicit := os.environ.get("AICP_KEYCLOAK_CACHE"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aicp" / "keycloak"


def home() -> Path:
    """Where the unpacked distribution of VERSION is (or will be)."""
    return cache_root() / VERSION / "dist"


def installed() -> bool:
    return (home() / "lib" / "quarkus-run.jar").is_file() and (home() / ".complete").is_file()


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on `directory/.lock` (other processes wait for it)."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure(say: Callable[[str], None] = print) -> Path:
    """The distribution's home directory, downloaded and unpacked first when missing."""
    if installed():
        return home()
    root = cache_root() / VERSION
    with locked(root):
        if installed():
            return home()
        archive = root / f"keycloak-{VERSION}.zip"
        if not archive.is_file():
            say(f"keycloak: downloading {ARTIFACT} (~177 MB) into {root}")
            _download(archive)
        say(f"keycloak: unpacking {archive.name}")
        _unpack(archive, home())
    return home()


def _download(archive: Path) -> None:
    partial = archive.with_suffix(".part")
    try:
        _fetch(URL, partial)
        expected = _fetch_text(URL + ".sha1").split()[0]
    except OSError as https_error:
        partial.unlink(missing_ok=True)
        _maven_get(partial, https_error)
        expected = None
    if expected is not None:
        actual = hashlib.sha1(partial.read_bytes(), usedforsecurity=False).hexdigest()
        if actual != expected:
            partial.unlink(missing_ok=True)
            raise DistributionError(
                f"keycloak: {URL} has SHA-1 {actual}, Maven Central says {expected}"
            )
    partial.rename(archive)


def _fetch(url: str, target: Path) -> None:
    with (
        urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response,
        target.open("wb") as out,
    ):
        shutil.copyfileobj(response, out, 1 << 20)


def _fetch_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as response:
        text: str = response.read().decode("ascii", "replace")
        return text


def _maven_get(target: Path, https_error: OSError) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DistributionError(
            f"keycloak: cannot download {URL} ({https_error}) and there is no mvn to try "
            "Maven's own resolver"
        )
    done = subprocess.run(
        [mvn, "-B", "-q", "dependency:get", f"-Dartifact={ARTIFACT}", "-Dtransitive=false"],
        capture_output=True,
        text=True,
        timeout=DOWNLOAD_TIMEOUT_SECONDS,
        check=False,
    )
    local = (
        Path.home()
        / ".m2/repository/org/keycloak/keycloak-quarkus-dist"
        / VERSION
        / f"keycloak-quarkus-dist-{VERSION}.zip"
    )
    if done.returncode != 0 or not local.is_file():
        last = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
        raise DistributionError(f"keycloak: mvn dependency:get {ARTIFACT} failed: {last[0]}")
    shutil.copyfile(local, target)


def _unpack(archive: Path, target: Path) -> None:
    """Unpack the zip's one top directory as `target`, keeping executable bits."""
    staging = target.with_name(target.name + ".unpacking")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(staging)
            for info in zipped.infolist():
                mode = (info.external_attr >> 16) & 0o777
                if mode:
                    (staging / info.filename).chmod(mode)
    except (zipfile.BadZipFile, OSError) as exc:
        archive.unlink(missing_ok=True)  # a broken download is fetched anew next time
        shutil.rmtree(staging, ignore_errors=True)
        raise DistributionError(f"keycloak: cannot unpack {archive}: {exc}") from exc
    (top,) = [entry for entry in staging.iterdir() if entry.is_dir()]
    shutil.rmtree(target, ignore_errors=True)
    top.rename(target)
    staging.rmdir()
    (target / ".complete").write_text(VERSION + "\n")
