"""Rounding to precision: what an uncertainty allows, or a few significant digits, never a float's repr."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vocabulary.numbers import MISSING, decimals_for, plus_minus, rounded, rounded_float


@pytest.mark.parametrize(("value", "sd", "text"), [
    (2.2894284851066633, 0.05, "2.29"),
    (2.2894284851066633, None, "2.289"),
    (-3.14159, 0.15, "-3.14"),
    (-0.001, 0.05, "0.00"),  # never "-0.00"
    (1234.5678, 40.0, "1230"),
    (0.5, 0.0, "0.5"),  # a zero uncertainty is not usable: significant digits instead
    (0.5, float("nan"), "0.5"),
    (12.0, None, "12"),
    (3, 0.5, "3"),
    (None, 0.1, MISSING),
    (float("nan"), None, MISSING),
    (1.234e-5, None, "1.234e-05"),
])
def test_a_value_prints_to_the_precision_it_carries(value, sd, text):
    assert rounded(value, sd) == text


def test_a_value_with_its_uncertainty_shares_its_decimals():
    assert plus_minus(-5.0912, 0.05, unit="kcal/mol") == "-5.09 ± 0.05 kcal/mol"
    assert plus_minus(81.234, 1.6, unit="%") == "81.2 ± 1.6 %"
    assert plus_minus(81.234, None, unit="%") == "81.23 %"


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6),
       st.floats(min_value=1e-4, max_value=1e3))
def test_rounding_never_moves_a_value_by_more_than_half_its_last_kept_decimal(value, sd):
    decimals = decimals_for(sd)
    assert abs(rounded_float(value, sd) - value) <= 0.5 * 10.0 ** -decimals + 1e-9 * max(1.0, abs(value))
    assert float(rounded(value, sd)) == pytest.approx(rounded_float(value, sd), abs=10.0 ** -decimals)


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
def test_without_an_uncertainty_at_most_four_significant_digits_are_written(value):
    text = rounded(value)
    mantissa = text.split("e")[0].lstrip("-").replace(".", "").lstrip("0")
    assert len(mantissa) <= 4 or "." not in text  # whole numbers keep their integer digits
    assert float(text) == pytest.approx(value, rel=1e-3, abs=1e-300) or math.isclose(float(text), 0.0)
