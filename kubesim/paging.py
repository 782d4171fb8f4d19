"""`limit`/`continue` paging of lists. The token names the resourceVersion the first page was
read at and the last key returned; pages continue in key order from the current state (the real
apiserver reads the old snapshot from etcd). A token older than the watch history is 410
`Expired`, as a compacted etcd revision is."""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

import msgspec

from kubesim.model import StoreError

if TYPE_CHECKING:
    from kubesim.tables import Stored


def _key(entry: Stored) -> tuple[str, str]:
    meta = entry.obj["metadata"]
    return (meta.get("namespace", ""), meta["name"])


def page(
    entries: list[Stored], limit: int, token: str | None, rv: int, oldest: int
) -> tuple[list[Stored], str | None, int, int]:
    """(items, next token or None, remaining count, list RV) for one page."""
    if token:
        try:
            decoded = msgspec.json.decode(base64.urlsafe_b64decode(token.encode()))
            start_rv, start = int(decoded["rv"]), (decoded["ns"], decoded["name"])
        except (binascii.Error, msgspec.DecodeError, KeyError, TypeError, ValueError) as exc:
            raise StoreError(400, "BadRequest", "continue key is not valid") from exc
        if start_rv < oldest:
            raise StoreError(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter.",
            )
        entries = [e for e in entries if _key(e) > start]
        rv = start_rv
    if limit <= 0 or len(entries) <= limit:
        return entries, None, 0, rv
    items = entries[:limit]
    ns, name = _key(items[-1])
    next_token = base64.urlsafe_b64encode(
        msgspec.json.encode({"rv": rv, "ns": ns, "name": name})
    ).decode()
    return items, next_token, len(entries) - limit, rv
