"""The few apiserver calls the launcher makes while it sets a cluster up (stdlib HTTP only:
the launcher runs before any event loop, from a plain `python -m realcluster up` too)."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

Obj = dict[str, Any]


class ApiError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status


@dataclass(frozen=True)
class Api:
    url: str
    token: str
    ca_file: Path

    def _context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def request(
        self, method: str, path: str, body: Obj | None = None, *, content_type: str = ""
    ) -> Obj:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type or "application/json")
        try:
            with urllib.request.urlopen(request, context=self._context(), timeout=10) as answer:
                text = answer.read().decode()
        except urllib.error.HTTPError as exc:
            raise ApiError(exc.code, exc.read().decode(errors="replace")) from exc
        return json.loads(text) if text else {}

    def get(self, path: str) -> Obj:
        return self.request("GET", path)

    def apply(self, path: str, body: Obj, manager: str = "aicp-real-cluster") -> Obj:
        """Server-side apply of `body` at `path` (the object's own URL)."""
        return self.request(
            "PATCH",
            f"{path}?fieldManager={manager}&force=true",
            body,
            content_type="application/apply-patch+yaml",
        )

    def healthy(self, path: str) -> bool:
        try:
            request = urllib.request.Request(self.url + path)
            request.add_header("Authorization", f"Bearer {self.token}")
            with urllib.request.urlopen(request, context=self._context(), timeout=5) as answer:
                return bool(answer.status == 200)
        except urllib.error.HTTPError:
            return False


def http_ok(url: str, *, ca_file: Path | None = None, insecure: bool = False) -> bool:
    """GET `url` answers 200 (no authentication)."""
    context: ssl.SSLContext | None = None
    if url.startswith("https"):
        context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
        if insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, context=context, timeout=5) as answer:
            return bool(answer.status == 200)
    except urllib.error.HTTPError:
        return False
