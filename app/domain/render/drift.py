"""Drift: what aicp declares in a manifest that the live object no longer has (docs/DESIGN.md §8).

`declared_drift(desired, live)` walks only the fields of the rendered manifest, so fields
other managers own (Kueue's `suspend` and node selector, defaults the apiserver fills in,
status) never count as drift. The result is a list of short, stable descriptions for the
`DriftCorrected` event; empty means nothing to correct.

Comparison rules, chosen to match how the apiserver hands objects back:

- maps: every declared key must be present (extra keys are someone else's);
- `finalizers`: every declared finalizer must be present, in any order (Kueue and the Job
  controller add their own);
- other lists: same length, compared item by item (aicp's lists are atomic);
- scalars: equal, where two Kubernetes quantities are equal by value (`16` and `"16"`,
  `"1024Mi"` and `"1Gi"`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.domain.quantity import QuantityError, parse_quantity

_SET_LISTS = ("finalizers",)


def _same_scalar(desired: object, live: object) -> bool:
    if desired == live:
        return True
    if isinstance(desired, bool) or isinstance(live, bool):
        return False
    if isinstance(desired, int | str) and isinstance(live, int | str):
        try:
            return parse_quantity(str(desired)) == parse_quantity(str(live))
        except QuantityError:
            return False
    return False


def _child(path: str, key: str) -> str:
    if "/" in key or "." in key:
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _walk(desired: Any, live: Any, path: str, found: list[str]) -> None:
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            found.append(f"{path} is missing")
            return
        for key, value in desired.items():
            child = _child(path, str(key))
            if key not in live or live[key] is None:
                found.append(f"{child} is missing")
            else:
                _walk(value, live[key], child, found)
        return
    if isinstance(desired, Sequence) and not isinstance(desired, str):
        if not isinstance(live, Sequence) or isinstance(live, str):
            found.append(f"{path} is missing")
        elif path.rsplit(".", 1)[-1] in _SET_LISTS:
            found.extend(f"{path} lacks {item}" for item in desired if item not in live)
        elif len(desired) != len(live):
            found.append(f"{path} has {len(live)} items, aicp declares {len(desired)}")
        else:
            for index, (want, have) in enumerate(zip(desired, live, strict=True)):
                _walk(want, have, f"{path}[{index}]", found)
        return
    if not _same_scalar(desired, live):
        found.append(f"{path} is {live!r}, aicp declares {desired!r}")


def declared_drift(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> list[str]:
    """Descriptions of every declared field of `desired` that `live` lacks or contradicts.

    `live` None (the object is gone) is one finding: the object itself is missing.
    `apiVersion` and `kind` are not compared (a served older version is the same object).
    """
    if live is None:
        return [f"{desired.get('kind', 'object')} {desired['metadata']['name']} is missing"]
    found: list[str] = []
    for key in desired:
        if key in ("apiVersion", "kind"):
            continue
        if key not in live:
            found.append(f"{key} is missing")
        else:
            _walk(desired[key], live[key], key, found)
    return found
