"""Label and field selectors with Kubernetes semantics.

Label selectors: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a)`, `k`, `!k`; commas AND.
Field selectors: `=`, `==`, `!=` on `metadata.name`, `metadata.namespace` and the per-kind
fields in `FIELD_SELECTABLE` (anything else is a 400 BadRequest, as on a real apiserver).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from kubesim.model import StoreError

Op = Literal["=", "!=", "in", "notin", "exists", "!exists"]

_SET_RE = re.compile(r"\s*(!?)\s*([A-Za-z0-9./_-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*")
_EQ_RE = re.compile(r"\s*([A-Za-z0-9./_-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*")

FIELD_SELECTABLE: dict[str, frozenset[str]] = {
    "Pod": frozenset({"spec.nodeName", "status.phase"}),
    "Job": frozenset({"status.successful"}),
    "Workload": frozenset({"status.admission.clusterQueue"}),
}


@dataclass(frozen=True)
class Requirement:
    key: str
    op: Op
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.op == "=":
            return value is not None and value in self.values
        if self.op == "!=":
            return value is None or value not in self.values
        if self.op == "in":
            return value is not None and value in self.values
        if self.op == "notin":
            return value is None or value not in self.values
        if self.op == "exists":
            return value is not None
        return value is None


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside `( )`."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(selector):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return [t for t in terms if t.strip()]


def _bad(selector: str, what: str = "label") -> StoreError:
    return StoreError(
        400, "BadRequest", f'unable to parse requirement: invalid {what} selector "{selector}"'
    )


@lru_cache(maxsize=1024)
def parse_label_selector(selector: str | None) -> tuple[Requirement, ...]:
    """Parse into requirements (all must match); 400 BadRequest when malformed."""
    if not selector:
        return ()
    reqs: list[Requirement] = []
    for term in _split_terms(selector):
        eq = _EQ_RE.fullmatch(term)
        if eq:
            key, op, value = eq.groups()
            reqs.append(Requirement(key, "!=" if op == "!=" else "=", frozenset({value})))
            continue
        st = _SET_RE.fullmatch(term)
        if not st:
            raise _bad(selector)
        neg, key, set_op, values = st.groups()
        if set_op:
            if neg:
                raise _bad(selector)
            vals = frozenset(v.strip() for v in values.split(",") if v.strip())
            reqs.append(Requirement(key, "in" if set_op == "in" else "notin", vals))
        else:
            reqs.append(Requirement(key, "!exists" if neg else "exists"))
    return tuple(reqs)


def labels_match(labels: Mapping[str, str], selector: str | None) -> bool:
    """Kubernetes label-selector semantics (=, ==, !=, in, notin, exists, !exists; comma = AND)."""
    return all(r.matches(labels) for r in parse_label_selector(selector))


def object_labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] | None = obj.get("metadata", {}).get("labels")
    return labels or {}


@dataclass(frozen=True)
class FieldRequirement:
    path: tuple[str, ...]
    negate: bool
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        cur: Any = obj
        for part in self.path:
            cur = cur.get(part) if isinstance(cur, Mapping) else None
        actual = "" if cur is None else str(cur).lower() if isinstance(cur, bool) else str(cur)
        return (actual == self.value) != self.negate


@lru_cache(maxsize=1024)
def parse_field_selector(selector: str | None, kind: str) -> tuple[FieldRequirement, ...]:
    """Parse a field selector for `kind`; 400 BadRequest on unknown fields or bad syntax."""
    if not selector:
        return ()
    allowed = {"metadata.name", "metadata.namespace"} | FIELD_SELECTABLE.get(kind, frozenset())
    reqs = []
    for term in _split_terms(selector):
        m = re.fullmatch(r"\s*([A-Za-z0-9._-]+)\s*(==|=|!=)\s*(.*?)\s*", term)
        if not m:
            raise _bad(selector, "field")
        field, op, value = m.groups()
        if field not in allowed:
            raise StoreError(
                400,
                "BadRequest",
                f"field label not supported: {field}",
            )
        reqs.append(FieldRequirement(tuple(field.split(".")), op == "!=", value))
    return tuple(reqs)


def fields_match(obj: Mapping[str, Any], reqs: tuple[FieldRequirement, ...]) -> bool:
    return all(r.matches(obj) for r in reqs)


def equality_terms(reqs: tuple[Requirement, ...]) -> list[tuple[str, str]]:
    """The `k=v` terms of a selector, which the store answers from its label index."""
    return [(r.key, next(iter(r.values))) for r in reqs if r.op == "=" and len(r.values) == 1]


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    """A `metav1.LabelSelector` as apimachinery prints it (`LabelSelectorAsSelector(s).String()`):
    requirements sorted by key, `k=v`, `k in (a,b)`, `k notin (a)`, `k`, `!k`; "" when empty."""
    terms: list[tuple[str, str]] = []
    for key, value in ((selector or {}).get("matchLabels") or {}).items():
        terms.append((str(key), f"{key}={value}"))
    for expr in (selector or {}).get("matchExpressions") or []:
        key, op = str(expr.get("key", "")), expr.get("operator")
        values = ",".join(sorted(str(v) for v in expr.get("values") or []))
        if op == "In":
            terms.append((key, f"{key} in ({values})"))
        elif op == "NotIn":
            terms.append((key, f"{key} notin ({values})"))
        elif op == "Exists":
            terms.append((key, key))
        elif op == "DoesNotExist":
            terms.append((key, f"!{key}"))
    return ",".join(text for _, text in sorted(terms))


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a `metav1.LabelSelector` selects `labels`: a missing (null) selector selects
    nothing, an empty one everything (`LabelSelectorAsSelector`)."""
    if selector is None:
        return False
    return labels_match(labels, format_label_selector(selector))
