"""Numbers as people read them: a fixed number of significant digits, never an exponent, and rates in the
prefix that keeps them between 1 and 1000 (1.83 TB/s rather than 1.8e+03 GB/s, 621 MFLOP/s rather than 0.000621
TFLOP/s on a CPU; TFLOP/s and TB/s at most)."""

from __future__ import annotations

import math

# Prefixes a rate may move between, largest first.
_PREFIXES = (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0))
_SCALED = {"FLOP/s", "B/s"}  # the base units whose prefix may change


def sig(value: float, digits: int = 3) -> str:
    """`value` with `digits` significant digits in positional notation; a larger integer part is shown whole."""
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 10**digits:
        return f"{value:.0f}"
    rounded = _round(value, digits)  # first: 9.996 becomes 10.0, not 10.00
    if rounded == 0:
        return "0"
    exponent = math.floor(math.log10(abs(rounded)))
    return f"{rounded:.{max(0, digits - 1 - exponent)}f}"


def _round(value: float, digits: int) -> float:
    return float(f"{value:.{digits - 1}e}") if math.isfinite(value) else value


def split_unit(unit: str) -> tuple[str, float, str] | None:
    """(prefix, its factor, base) of a rate such as TFLOP/s or GB/s; None for any other unit."""
    for prefix, factor in _PREFIXES:
        base = unit[len(prefix) :]
        if unit.startswith(prefix) and base in _SCALED:
            return prefix, factor, base
    return None


def scaled(value: float, unit: str) -> tuple[float, str]:
    """A rate in the prefix that puts it in [1, 1000) (others as they are): (1834, 'GB/s') -> (1.834, 'TB/s')."""
    parts = split_unit(unit)
    if parts is None or value == 0 or not math.isfinite(value):
        return value, unit
    _, factor, base = parts
    absolute = abs(value) * factor
    for prefix, size in _PREFIXES:
        if absolute >= size or prefix == "":
            return value * factor / size, prefix + base
    return value, unit  # pragma: no cover - the loop always returns


def quantity(value: float, unit: str, digits: int = 3) -> str:
    """`value unit` with `digits` significant digits, a rate in its readable prefix: '1.83 TB/s'."""
    _, shown_unit = scaled(_round(value, digits), unit)  # rounded first: 999.7 GB/s reads 1.00 TB/s
    if shown_unit != unit:
        value = value * split_unit(unit)[1] / split_unit(shown_unit)[1]
    return f"{sig(value, digits)} {shown_unit}".rstrip()
