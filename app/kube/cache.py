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
    from collections.abc import Callable, Iterator

    #: What an index files an object under: a value, or None to leave the object out.
    IndexKey = Callable[[Manifest], str | None]


class _Index:
    def __init__(self, key: IndexKey) -> None:
        self.key = key
        self.keys: dict[str, set[Key]] = {}

    def add(self, key: Key, obj: Manifest) -> None:
        value = self.key(obj)
        if value is not None:
            self.keys.setdefault(value, set()).add(key)

    def discard(self, key: Key, obj: Manifest) -> None:
        value = self.key(obj)
        keys = self.keys.get(value) if value is not None else None
        if value is not None and keys is not None:
            keys.discard(key)
            if not keys:
                del self.keys[value]


def _label_value(label: str) -> IndexKey:
    return lambda obj: labels_of(obj).get(label)


class ObjectCache:
    """Objects of one kind by key, with indexes: by each registered label key (always
    `aicp.dev/uid`), and by any value computed from an object (`index_by`)."""

    def __init__(self) -> None:
        self._objects: dict[Key, Manifest] = {}
        self._indexes: dict[str, _Index] = {}
        self.index_by_label(UID_LABEL)

    def index_by_label(self, label: str) -> None:
        """Maintain an index on `label`'s value (also over what is already cached)."""
        self.index_by(label, _label_value(label))

    def index_by(self, name: str, key: IndexKey) -> None:
        """Maintain the index `name`, filing each object under `key(obj)` (objects for which it
        is None are left out), also over what is already cached. `key` must depend on the
        object alone: it is asked again when the object is replaced or removed."""
        if name in self._indexes:
            return
        index = _Index(key)
        for obj_key, obj in self._objects.items():
            index.add(obj_key, obj)
        self._indexes[name] = index

    def get(self, namespace: str | None, name: str) -> Manifest | None:
        return self._objects.get((namespace or "", name))

    def by_label(self, label: str, value: str) -> list[Manifest]:
        """Objects whose `label` equals `value`, ordered by key; `label` must be indexed."""
        return self.by_index(label, value)

    def by_index(self, name: str, value: str) -> list[Manifest]:
        """Objects the index `name` files under `value`, ordered by key."""
        try:
            keys = self._indexes[name].keys.get(value, ())
        except KeyError:
            raise KeyError(f"{name!r} is not indexed; call index_by_label first") from None
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
        for index in self._indexes.values():
            index.add(key, obj)
        return old

    def pop(self, key: Key) -> Manifest | None:
        """Remove and return the object at `key`, if any."""
        old = self._objects.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def _unindex(self, key: Key, obj: Manifest) -> None:
        for index in self._indexes.values():
            index.discard(key, obj)
