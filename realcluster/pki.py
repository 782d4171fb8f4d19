"""Keys and certificates of one real cluster, made with the machine's `openssl`.

One throwaway CA signs a serving certificate for 127.0.0.1 that the apiserver and Kueue's
webhook server present; clients trust the CA, so nothing skips TLS verification. The apiserver
signs service-account tokens with its own RSA key.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


class PkiError(Exception):
    """openssl is missing or failed."""


@dataclass(frozen=True)
class Pki:
    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "tls.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "tls.key"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"


_SERVING_EXTENSIONS = """\
basicConstraints=CA:FALSE
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost
"""


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise PkiError("real cluster: `openssl` is not installed (apt-get install openssl)")
    done = subprocess.run([openssl, *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise PkiError(f"real cluster: openssl {args[0]} failed: {done.stderr.strip()[:300]}")


def make_pki(directory: Path) -> Pki:
    """A CA, a serving pair for 127.0.0.1 signed by it, and a service-account key."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
        "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=aicp-real-cluster-ca",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out", "tls.csr",
        "-subj", "/CN=127.0.0.1",
        cwd=directory,
    )  # fmt: skip
    (directory / "serving.ext").write_text(_SERVING_EXTENSIONS)
    _openssl(
        "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "3650", "-out", "tls.crt", "-extfile", "serving.ext",
        cwd=directory,
    )  # fmt: skip
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=directory)
    return pki
