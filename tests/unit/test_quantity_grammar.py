"""Kubernetes quantities: every suffix, exponent and rounding rule, on generated inputs.

The examples pin Kubernetes' own answers (``resource.MustParse``); the properties build a
quantity from its parts (sign, digits, suffix) and check the parser gives the value those parts
mean, that it agrees with the simulator's independent parser, that anything it accepts matches
the pattern of Kubernetes' OpenAPI schema for quantities, and that it never raises anything but
``QuantityError``, whatever the text.
"""

from __future__ import annotations

import re
from decimal import ROUND_UP, Decimal, localcontext

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.quantity import MAX_VALUE, QuantityError, parse_quantity, parse_signed_quantity
from app.domain.validation import check_cpu, check_memory
from kubesim.controllers.quantity import parse_milli

# io.k8s.apimachinery.pkg.api.resource.Quantity's pattern in Kubernetes' OpenAPI document.
OPENAPI_PATTERN = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?"
    r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("1E", Decimal(10**18), id="E-is-exa"),
        pytest.param("1Ei", Decimal(2**60), id="Ei-is-2^60"),
        pytest.param("1E3", Decimal(1000), id="E-with-digits-is-an-exponent"),
        pytest.param("1e+3", Decimal(1000), id="signed-exponent"),
        pytest.param("5e-1", Decimal("0.5"), id="negative-exponent"),
        pytest.param("1.", Decimal(1), id="trailing-point"),
        pytest.param(".5Gi", Decimal(2**29), id="leading-point"),
        pytest.param("+8", Decimal(8), id="plus-sign"),
        pytest.param("-0", Decimal(0), id="minus-zero"),
        pytest.param("0.1n", Decimal("1e-9"), id="below-nano-rounds-up"),
        pytest.param("1.0000000001", Decimal("1.000000001"), id="rounds-up-to-nano"),
        pytest.param("1e-2147483648", Decimal("1e-9"), id="smallest-exponent-rounds-up"),
        pytest.param("1e2147483647", MAX_VALUE, id="largest-exponent-is-capped"),
        pytest.param("9999999999999999999999999999999999", MAX_VALUE, id="long-digits-capped"),
        pytest.param("0" * 60 + "1", Decimal(1), id="leading-zeros"),
        pytest.param("0e2147483647", Decimal(0), id="zero-times-anything"),
    ],
)
def test_parses_as_kubernetes_does(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    ["", " 1", "1 ", "1e", "1e2147483648", "1e-2147483649", "1.5.5", "1ki", "1KI", "1Ki3", "e3",
     ".", "-", "+", "1e3.5", "0x10", "1_000", "\uff11", "-1", "-1m"],
)  # fmt: skip
def test_refuses_what_kubernetes_refuses_and_negatives(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


digits = st.text("0123456789", min_size=1, max_size=25)
numbers = st.one_of(
    digits,
    st.builds(lambda a, b: f"{a}.{b}", digits, st.text("0123456789", max_size=25)),
    st.builds(lambda b: f".{b}", digits),
)
signs = st.sampled_from(["", "+", "-"])


def expected(sign: str, number: str, scale: Decimal) -> Decimal:
    with localcontext(prec=200):  # exact for every generated number
        value = Decimal(number) * scale
    if value == 0:
        return Decimal(0)
    if value > MAX_VALUE:
        value = MAX_VALUE
    else:
        value = min(value.quantize(Decimal("1e-9"), rounding=ROUND_UP), MAX_VALUE)
    return -value if sign == "-" else value


@settings(max_examples=400)
@given(signs, numbers, st.sampled_from(sorted(DECIMAL_SI) + sorted(BINARY_SI)))
def test_a_number_with_a_suffix_means_number_times_the_suffix(
    sign: str, number: str, suffix: str
) -> None:
    scale = (
        Decimal(10) ** DECIMAL_SI[suffix]
        if suffix in DECIMAL_SI
        else Decimal(2 ** BINARY_SI[suffix])
    )
    text = f"{sign}{number}{suffix}"
    assert parse_signed_quantity(text) == expected(sign, number, scale)
    assert OPENAPI_PATTERN.match(text)


@settings(max_examples=400)
@given(
    signs,
    numbers,
    st.sampled_from("eE"),
    st.sampled_from(["", "+"]),
    st.integers(-(2**31), 2**31 - 1),
)
def test_a_decimal_exponent_moves_the_point(
    sign: str, number: str, e: str, exponent_sign: str, exponent: int
) -> None:
    text = f"{sign}{number}{e}{exponent_sign if exponent >= 0 else ''}{exponent}"
    value = parse_signed_quantity(text)
    mantissa = Decimal(number)
    if mantissa == 0:
        assert value == 0
    elif mantissa.adjusted() + exponent >= 20:
        assert abs(value) == MAX_VALUE
    elif mantissa.adjusted() + exponent < -10:
        assert abs(value) == Decimal("1e-9")
    else:
        assert value == expected(sign, number, Decimal(10) ** exponent)
    assert OPENAPI_PATTERN.match(text)


@settings(max_examples=300)
@given(numbers, st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "e3", "E2"]))
def test_agrees_with_the_simulators_parser_on_what_aicp_accepts(number: str, suffix: str) -> None:
    text = f"{number}{suffix}"
    if check_cpu("cpu", text, allow_zero=True) == []:
        assert parse_milli(text) == parse_quantity(text) * 1000


@settings(max_examples=500)
@given(st.text(alphabet=st.sampled_from("0123456789.+-eEinumkKMGTP \x00\u0663"), max_size=30))
def test_any_text_either_parses_or_raises_quantity_error(text: str) -> None:
    try:
        value = parse_signed_quantity(text)
    except QuantityError:
        assert not re.fullmatch(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE])?", text)
        return
    assert abs(value) <= MAX_VALUE
    assert OPENAPI_PATTERN.match(text)


@settings(max_examples=300)
@given(st.text(max_size=64))
def test_cpu_and_memory_checks_answer_for_any_text(text: str) -> None:
    for check in (check_cpu, check_memory):
        for violation in check("cpu", text, allow_zero=False):
            assert violation[0] == "cpu" and violation[1]


@pytest.mark.parametrize(
    ("check", "text", "message"),
    [
        (check_cpu, "1E", "must be at most 1T"),
        (check_cpu, "1e20", "must be at most 1T"),
        (check_memory, "1Ei", "must be at most 64Pi"),
        (check_memory, "9" * 64, "must be at most 64Pi"),
        (check_memory, "1e2147483647", "must be at most 64Pi"),
    ],
)
def test_amounts_beyond_the_bound_name_the_bound(check: object, text: str, message: str) -> None:
    violations = check("field", text, allow_zero=False)  # type: ignore[operator]
    assert len(violations) == 1 and violations[0][1].startswith(message)


def test_the_bounds_themselves_are_accepted() -> None:
    assert check_cpu("cpu", "1T", allow_zero=False) == []
    assert check_memory("memory", "64Pi", allow_zero=False) == []
