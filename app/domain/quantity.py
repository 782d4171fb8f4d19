"""Kubernetes resource quantities (`500m`, `32`, `256Gi`, `1e3`, `1Ei`) as exact decimals.

The grammar is Kubernetes' own (``k8s.io/apimachinery/pkg/api/resource``)::

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | <sign><number>
    <sign>            ::= "+" | "-"
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedInteger> | "E" <signedInteger>

and so are its value rules: the exponent must fit a 32-bit integer, a non-zero value is rounded
up (away from zero) to a whole nano-unit ("if you want some resources, you should get some"),
and a magnitude above 2^63-1 is capped there. Note that ``1E`` is one exa while ``1E3`` is one
thousand, and that ``1e`` is not a quantity.

Parsing never builds a number bigger than the cap: an exponent only moves the decimal point
(``Decimal.scaleb``), and anything whose magnitude is already beyond 10^19 is capped before any
rounding, so ``1e2147483647`` costs what ``1`` costs.
"""

from __future__ import annotations

import re
from decimal import ROUND_UP, Context, Decimal

_GRAMMAR = re.compile(
    r"(?P<sign>[+-]?)"
    r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)

_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_INT32 = 2**31

#: Kubernetes caps every quantity's magnitude here.
MAX_VALUE = Decimal(2**63 - 1)
NANO = Decimal("1e-9")
# Exact arithmetic for every value below the cap: 19 integer digits, 9 fractional, headroom.
_EXACT = Context(prec=60, Emin=-(10**12), Emax=10**12, rounding=ROUND_UP, traps=[])

_SUFFIX = {
    **{suffix: Decimal(10) ** power for suffix, power in _DECIMAL_SI.items()},
    **{suffix: Decimal(2**power) for suffix, power in _BINARY_SI.items()},
}


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def _not_a_quantity(text: object) -> QuantityError:
    return QuantityError(f"{text!r} is not a Kubernetes quantity (examples: 500m, 32, 256Gi, 1e3)")


def parse_signed_quantity(text: str) -> Decimal:
    """The value Kubernetes gives ``text``, sign included; QuantityError when it is not one."""
    match = _GRAMMAR.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise _not_a_quantity(text)
    number = Decimal(match.group("number"))
    suffix = match.group("suffix") or ""
    if suffix in _SUFFIX:
        value = _EXACT.multiply(number, _SUFFIX[suffix])
    else:  # a decimal exponent: e/E followed by a signed integer that fits 32 bits
        exponent = int(suffix[1:])
        if not -_INT32 <= exponent < _INT32:
            raise QuantityError(f"{text!r}: the exponent must fit a 32-bit integer")
        value = number.scaleb(exponent, _EXACT)
    if value.is_zero():
        return Decimal(0)
    if value.adjusted() >= 19 or value > MAX_VALUE:
        value = MAX_VALUE
    else:
        value = value.quantize(NANO, rounding=ROUND_UP, context=_EXACT)
        value = min(value, MAX_VALUE)
    return -value if match.group("sign") == "-" else value


def parse_quantity(text: str) -> Decimal:
    """The value of a non-negative Kubernetes quantity; raise QuantityError otherwise.

    Negative quantities are refused: nothing aicp sizes may be negative (``-0`` is zero).
    """
    value = parse_signed_quantity(text)
    if value < 0:
        raise QuantityError(f"{text!r} must not be negative")
    return value


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
