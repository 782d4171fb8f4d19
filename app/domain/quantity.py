"""Kubernetes resource quantities (`500m`, `32`, `256Gi`, `1e3`) as exact decimals."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")

_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def parse_quantity(text: str) -> Decimal:
    """Return the value of a Kubernetes quantity; raise QuantityError when it is not one.

    Negative quantities are rejected: nothing aicp sizes may be negative.
    """
    match = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
    if match is None or text != text.strip():
        raise QuantityError(f"{text!r} is not a Kubernetes quantity (examples: 500m, 32, 256Gi)")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        value = Decimal(number)
    except InvalidOperation as exc:
        raise QuantityError(f"{text!r} is not a Kubernetes quantity") from exc
    if value < 0 or number.count(".") > 1:
        raise QuantityError(f"{text!r} must not be negative")
    if suffix[:1] in ("e", "E"):
        return value * (Decimal(10) ** int(suffix[1:]))
    return value * _SUFFIX[suffix]


def is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def format_bytes(value: Decimal) -> str:
    """Render a byte count in the largest binary unit that divides it (`256Gi`), for reasons."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _SUFFIX[suffix]
        if value >= unit and value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value.normalize()) if value == value.to_integral() else str(value)


def format_cpu(value: Decimal) -> str:
    """Render a cpu amount as cores (`32`) or millicores (`500m`)."""
    if value == value.to_integral():
        return str(int(value))
    return f"{int(value * 1000)}m"
