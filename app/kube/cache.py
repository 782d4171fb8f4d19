"""An informer's local copy of one kind: objects by (namespace, name), indexed by label values.

Only the informer that owns a cache writes to it, always from its own task, so readers in the
same event loop never see a half-applied event and no locking is needed. Objects are the wire
dicts the API server sent; they are shared, not copied — treat them as read-only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.domain.kube_objects import Key, Manifest, key_of, labels_of
from app.domain.labels import UID_LABEL

if TYPE_CHECKING:
    from collections.abc import Iterator


class ObjectCache:
    """Objects of one kind by key, indexed by each registered label key (always `aicp.dev/uid`)."""

    def __init__(self) -> None:
        self._objects: dict[Key, Manifest] = {}
        self._indexes: dict[str, dict[str, set[Key]]] = {}
        self.index_by_label(UID_LABEL)

    def index_by_label(self, label: str) -> None:
        """Maintain an index on `label`'s value (also over what is already cached)."""
        if label in self._indexes:
            return
        index: dict[str, set[Key]] = {}
        for key, obj in self._objects.items():
            value = labels_of(obj).get(label)
            if value is not None:
                index.setdefault(value, set()).add(key)
        self._indexes[label] = index

    def get(self, namespace: str | None, name: str) -> Manifest | None:
        return self._objects.get((namespace or "", name))

    def by_label(self, label: str, value: str) -> list[Manifest]:
        """Objects whose `label` equals `value`, ordered by key; `label` must be indexed."""
        try:
            keys = self._indexes[label].get(value, ())
        except KeyError:
            raise KeyError(f"label {label!r} is not indexed; call index_by_label first") from None
        return [self._objects[k] for k in sorted(keys)]

    def all_keys(self) -> list[Key]:
        return list(self._objects)

    def __iter__(self) -> Iterator[Manifest]:
        return iter(list(self._objects.values()))

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    def put(self, obj: Manifest) -> Manifest | None:
        """Store `obj` (replacing the same key); return what it replaced."""
        key = key_of(obj)
        old = self._objects.get(key)
        if old is not None:
            self._unindex(key, old)
        self._objects[key] = obj
        for label, index in self._indexes.items():
            value = labels_of(obj).get(label)
            if value is not None:
                index.setdefault(value, set()).add(key)
        return old

    def pop(self, key: Key) -> Manifest | None:
        """Remove and return the object at `key`, if any."""
        old = self._objects.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def _unindex(self, key: Key, obj: Manifest) -> None:
        for label, index in self._indexes.items():
            value = labels_of(obj).get(label)
            if value is None:
                continue
            keys = index.get(value)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del index[value]
