"""One resource type's objects with the indexes a large cluster needs.

Objects are stored as committed: a dict that is never mutated again (copy on write) plus its JSON
encoding, made once per write and shared by lists, gets and every watcher. Indexes: by namespace,
by label `(key, value)` and by owner uid (garbage collection).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from kubesim.model import Obj, ResourceType

Key = tuple[str, str]  # (namespace or "", name)

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


def encode(obj: object) -> bytes:
    return _encoder.encode(obj)


def decode(raw: bytes) -> Obj:
    out: Obj = _decoder.decode(raw)
    return out


def clone(obj: Obj) -> Obj:
    """A deep copy of a JSON-shaped dict (faster than `copy.deepcopy`)."""
    return decode(encode(obj))


@dataclass(frozen=True, slots=True)
class Stored:
    obj: Obj  # never mutated after commit
    raw: bytes  # encode(obj), with apiVersion and kind first
    body_start: int  # raw[body_start:] is the object without apiVersion/kind, minus its "{"

    def item_raw(self, builtin: bool) -> bytes:
        """The list-item form: built-in list items carry no kind/apiVersion (kubernetes#3030)."""
        return b"{" + self.raw[self.body_start :] if builtin else self.raw


def stored(rt: ResourceType, obj: Obj) -> Stored:
    """Encode `obj` (whose first keys must be apiVersion and kind) for storage."""
    raw = encode(obj)
    prefix = len(b'{"apiVersion":') + len(encode(rt.api_version)) + len(b',"kind":')
    prefix += len(encode(rt.kind)) + 1
    return Stored(obj, raw, prefix)


def owner_uids(obj: Obj) -> list[str]:
    return [ref["uid"] for ref in obj["metadata"].get("ownerReferences") or () if "uid" in ref]


class Table:
    """The objects of one resource type, keyed by (namespace, name)."""

    def __init__(self, rt: ResourceType) -> None:
        self.rt = rt
        self.items: dict[Key, Stored] = {}
        self._by_ns: dict[str, set[str]] = {}
        self._by_label: dict[tuple[str, str], set[Key]] = {}
        self.by_owner: dict[str, set[Key]] = {}

    def get(self, key: Key) -> Stored | None:
        return self.items.get(key)

    def put(self, key: Key, entry: Stored) -> None:
        old = self.items.get(key)
        if old is not None:
            self._unindex(key, old.obj)
        self.items[key] = entry
        self._index(key, entry.obj)

    def remove(self, key: Key) -> None:
        old = self.items.pop(key, None)
        if old is not None:
            self._unindex(key, old.obj)

    def _index(self, key: Key, obj: Obj) -> None:
        self._by_ns.setdefault(key[0], set()).add(key[1])
        for label in (obj["metadata"].get("labels") or {}).items():
            self._by_label.setdefault(label, set()).add(key)
        for uid in owner_uids(obj):
            self.by_owner.setdefault(uid, set()).add(key)

    def _unindex(self, key: Key, obj: Obj) -> None:
        names = self._by_ns.get(key[0])
        if names is not None:
            names.discard(key[1])
            if not names:
                del self._by_ns[key[0]]
        for label in (obj["metadata"].get("labels") or {}).items():
            keys = self._by_label.get(label)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_label[label]
        for uid in owner_uids(obj):
            owned = self.by_owner.get(uid)
            if owned is not None:
                owned.discard(key)
                if not owned:
                    del self.by_owner[uid]

    def candidates(
        self, namespace: str | None, label_terms: Iterable[tuple[str, str]]
    ) -> Iterator[Stored]:
        """Entries in `namespace` (all when None) carrying every `(key, value)` label, sorted by
        key as etcd lists them. Other selector terms are left to the caller."""
        keys: set[Key] | None = None
        for term in label_terms:
            found = self._by_label.get(term, set())
            keys = set(found) if keys is None else keys & found
            if not keys:
                return
        if keys is not None:
            chosen = sorted(k for k in keys if namespace is None or k[0] == namespace)
        elif namespace is not None:
            chosen = [(namespace, n) for n in sorted(self._by_ns.get(namespace, ()))]
        else:
            chosen = sorted(self.items)
        for key in chosen:
            entry = self.items.get(key)
            if entry is not None:
                yield entry

    def namespaces(self) -> list[str]:
        return list(self._by_ns)
