"""Kubernetes resource quantities ("500m", "4Gi", "1e3", 8) as exact integer milli-units.

Quota arithmetic must be exact (a Workload that asks for exactly the remaining quota fits), so
quantities are held as integers of 1/1000 of the unit, as the apiserver's `MilliValue` does.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

_SUFFIXES: dict[str, Decimal] = {
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
_QUANTITY = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|([numkMGTPE]i?|Ki)?)")
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def parse_milli(value: object) -> int:
    """Parse a quantity into milli-units, rounding fractions of a milli-unit up (as K8s does).

    Raises ValueError for something that is not a quantity.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, float):
        value = repr(value)
    if not isinstance(value, str):
        raise ValueError(f"not a quantity: {value!r}")
    match = _QUANTITY.fullmatch(value.strip())
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    number, exponent, suffix = match.groups()
    try:
        amount = Decimal(number)
        amount *= Decimal(f"1{exponent}") if exponent else _SUFFIXES[suffix or ""]
    except (InvalidOperation, KeyError) as exc:
        raise ValueError(f"not a quantity: {value!r}") from exc
    return int((amount * 1000).to_integral_value(rounding=ROUND_CEILING))


def format_milli(milli: int, *, binary: bool = False) -> str:
    """Canonical text for a milli-unit amount: "8", "500m", or with `binary` "4Gi"."""
    if milli % 1000:
        return f"{milli}m"
    whole = milli // 1000
    if binary and whole:
        for suffix, factor in _BINARY:
            if whole % factor == 0:
                return f"{whole // factor}{suffix}"
    return str(whole)


def format_resource(resource: str, milli: int) -> str:
    """Format as Kubernetes prints that resource: memory and storage in binary units."""
    return format_milli(milli, binary=resource in ("memory", "ephemeral-storage"))
