"""Numbers as a person reads them: rounded to the precision they carry, never 2.2894284851066633.

A value with an uncertainty keeps the decimals its uncertainty allows (the uncertainty to one significant digit, two
when that digit is a 1, the usual rule for reporting a measurement); a value without one keeps ``digits``
significant digits and drops trailing zeros. Plain ASCII, so the text is the same in a terminal, HTML and CSV.

Example:
    >>> rounded(2.2894284851066633)
    '2.289'
    >>> rounded(2.2894284851066633, sd=0.05), plus_minus(-3.14159, 0.15, unit="kcal/mol")
    ('2.29', '-3.14 ± 0.15 kcal/mol')
"""

from __future__ import annotations

import math
from numbers import Integral, Real

__all__ = ["DIGITS", "decimals_for", "plus_minus", "rounded", "rounded_float"]

DIGITS = 4
"""Significant digits of a value whose uncertainty is not known."""

MISSING = "–"
"""What a missing value (None, NaN) prints as."""

_PLAIN_RANGE = (1e-3, 1e7)
"""Magnitudes outside this range are written in scientific notation (1.2e-05), inside it in plain decimals."""


def decimals_for(sd: float | None) -> int | None:
    """Decimals to keep for a value with standard uncertainty ``sd`` (negative: round to tens, hundreds, ...).

    None when ``sd`` is not a usable uncertainty (None, zero, negative, NaN or infinite).

    Example:
        >>> decimals_for(0.05), decimals_for(0.15), decimals_for(0.012), decimals_for(3.0), decimals_for(40.0)
        (2, 2, 3, 0, -1)
        >>> decimals_for(0.0) is None
        True
    """
    if sd is None or not _is_real(sd) or not math.isfinite(sd) or sd <= 0:
        return None
    exponent = math.floor(math.log10(sd))
    leading = int(sd / 10.0**exponent + 1e-9)
    return -exponent + (1 if leading == 1 else 0)


def rounded_float(value: float | None, sd: float | None = None, *, digits: int = DIGITS) -> float | None:
    """``value`` rounded as ``rounded`` writes it, as a float (for a CSV or JSON cell); None stays None.

    Example:
        >>> rounded_float(2.2894284851066633), rounded_float(2.2894284851066633, sd=0.05), rounded_float(1234.5678, 40)
        (2.289, 2.29, 1230.0)
    """
    if value is None or not _is_real(value) or not math.isfinite(value):
        return None if value is None or not _is_real(value) else float(value)
    decimals = decimals_for(sd)
    if decimals is None:
        decimals = _significant_decimals(float(value), digits)
    return float(round(float(value), decimals))


def rounded(value: float | int | None, sd: float | None = None, *, digits: int = DIGITS) -> str:
    """``value`` as text, to the precision ``sd`` gives it or else to ``digits`` significant digits.

    Integers print whole; None and NaN print as ``MISSING``; booleans and text print as themselves.

    Example:
        >>> rounded(0.123456, sd=0.05), rounded(1234.5678, sd=40), rounded(1234.5678), rounded(2.5), rounded(100.0)
        ('0.12', '1230', '1235', '2.5', '100')
        >>> rounded(1.234e-5), rounded(None), rounded(7), rounded(float("inf"))
        ('1.234e-05', '–', '7', 'inf')
    """
    if value is None:
        return MISSING
    if isinstance(value, bool) or not _is_real(value):
        return str(value)
    if isinstance(value, Integral):
        return str(int(value))
    number = float(value)
    if math.isnan(number):
        return MISSING
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    decimals = decimals_for(sd)
    if decimals is not None:
        if number != 0 and not _PLAIN_RANGE[0] <= abs(number) < _PLAIN_RANGE[1]:
            return _scientific(number, max(1, math.floor(math.log10(abs(number))) + decimals + 1))
        return _fixed(round(number, decimals), max(decimals, 0))
    if number != 0 and not _PLAIN_RANGE[0] <= abs(number) < _PLAIN_RANGE[1]:
        return _scientific(number, digits)
    text = _fixed(number, max(_significant_decimals(number, digits), 0))
    return text.rstrip("0").rstrip(".") if "." in text else text


def plus_minus(value: float | None, sd: float | None, *, unit: str | None = None, digits: int = DIGITS) -> str:
    """``"value ± sd unit"``, both rounded to the value's precision; just the value when ``sd`` is not usable.

    Example:
        >>> plus_minus(12.3456, 0.31), plus_minus(12.3456, None, unit="%"), plus_minus(None, 0.3)
        ('12.3 ± 0.3', '12.35 %', '–')
    """
    suffix = f" {unit}" if unit and value is not None else ""
    decimals = decimals_for(sd)
    if value is None or decimals is None:
        return rounded(value, digits=digits) + suffix
    value_text = rounded(value, sd)
    if "e" in value_text:  # a scientific value gets a scientific uncertainty: 5.00e-05 ± 1.0e-06, not ± 0.0000010
        sd_text = _scientific(float(sd), 2 if decimals > -math.floor(math.log10(float(sd))) else 1)
    else:
        sd_text = _fixed(round(float(sd), decimals), max(decimals, 0))
    return f"{value_text} ± {sd_text}{suffix}"


def _is_real(value: object) -> bool:
    return isinstance(value, Real)


def _significant_decimals(number: float, digits: int) -> int:
    if number == 0:
        return 0
    return digits - 1 - math.floor(math.log10(abs(number)))


def _fixed(number: float, decimals: int) -> str:
    text = f"{number:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text  # no "-0.00"


def _scientific(number: float, digits: int) -> str:
    return f"{number:.{max(digits - 1, 0)}e}"
