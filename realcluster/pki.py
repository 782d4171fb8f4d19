"""Keys and certificates of one real cluster, made with the machine's `openssl`.

One throwaway CA signs a serving certificate for 127.0.0.1 that the apiserver and Kueue's
webhook server present, and one for Kueue's visibility server (the machine's own address and
the name of its Service, which the apiserver's aggregator checks); clients trust the CA, so
nothing skips TLS verification. A second CA, the front proxy's, signs the client certificate
the apiserver presents when it forwards a request to the visibility server (API
aggregation), which trusts that CA for it alone. The apiserver signs service-account tokens
with its own RSA key.
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

    @property
    def front_proxy_ca_cert(self) -> Path:
        return self.directory / "front-proxy-ca.crt"

    @property
    def front_proxy_client_cert(self) -> Path:
        return self.directory / "front-proxy-client.crt"

    @property
    def front_proxy_client_key(self) -> Path:
        return self.directory / "front-proxy-client.key"

    @property
    def visibility_cert(self) -> Path:
        return self.directory / "visibility.crt"

    @property
    def visibility_key(self) -> Path:
        return self.directory / "visibility.key"


#: The common name of the front proxy's client certificate: the apiserver's
#: `--requestheader-allowed-names`, so no other holder of a front-proxy certificate is trusted.
FRONT_PROXY_CLIENT = "front-proxy-client"


def _extensions(usage: str, names: str = "") -> str:
    lines = [
        "basicConstraints=CA:FALSE",
        "keyUsage=digitalSignature,keyEncipherment",
        f"extendedKeyUsage={usage}",
    ]
    if names:
        lines.append(f"subjectAltName={names}")
    return "\n".join(lines) + "\n"


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise PkiError("real cluster: `openssl` is not installed (apt-get install openssl)")
    done = subprocess.run([openssl, *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise PkiError(f"real cluster: openssl {args[0]} failed: {done.stderr.strip()[:300]}")


def _make_ca(directory: Path, name: str, subject: str) -> None:
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
        "-keyout", f"{name}.key", "-out", f"{name}.crt", "-subj", f"/CN={subject}",
        cwd=directory,
    )  # fmt: skip


def _sign(directory: Path, name: str, subject: str, ca: str, extensions: str) -> None:
    """`name`.key and `name`.crt, for CN `subject`, signed by the CA `ca`."""
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
        "-subj", f"/CN={subject}",
        cwd=directory,
    )  # fmt: skip
    (directory / f"{name}.ext").write_text(extensions)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-days", "3650", "-out", f"{name}.crt", "-extfile", f"{name}.ext",
        cwd=directory,
    )  # fmt: skip


def make_pki(directory: Path, *, visibility_ip: str, visibility_names: tuple[str, ...]) -> Pki:
    """The CA and its serving pairs (127.0.0.1; the visibility server at `visibility_ip` and
    the DNS names `visibility_names`), the front proxy's CA and client pair, and a
    service-account key."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)
    _make_ca(directory, "ca", "aicp-real-cluster-ca")
    loopback = _extensions("serverAuth", "IP:127.0.0.1,DNS:localhost")
    _sign(directory, "tls", "127.0.0.1", "ca", loopback)
    names = ",".join([f"IP:{visibility_ip}", *(f"DNS:{name}" for name in visibility_names)])
    _sign(directory, "visibility", visibility_names[0], "ca", _extensions("serverAuth", names))
    _make_ca(directory, "front-proxy-ca", "aicp-real-cluster-front-proxy-ca")
    client = _extensions("clientAuth")
    _sign(directory, "front-proxy-client", FRONT_PROXY_CLIENT, "front-proxy-ca", client)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=directory)
    return pki
