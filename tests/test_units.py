"""Numbers as people read them: fixed significant digits, no exponents, rates in a readable prefix."""

from __future__ import annotations

import pytest

from tierbench.suite.show.site import charts, model
from tierbench.suite.units import quantity, sig


@pytest.mark.parametrize(
    "value, text",
    [(1834.5, "1834"), (0.0006209, "0.000621"), (54.0426, "54.0"), (9.996, "10.0"), (1.0, "1.00"), (0.0, "0")],
)
def test_significant_digits_without_exponents(value, text):
    assert sig(value) == text


@pytest.mark.parametrize(
    "value, unit, text",
    [
        (1834.5, "GB/s", "1.83 TB/s"),
        (999.7, "GB/s", "1.00 TB/s"),
        (812.3, "TFLOP/s", "812 TFLOP/s"),
        (0.0006209, "TFLOP/s", "621 MFLOP/s"),
        (4250.0, "TFLOP/s", "4250 TFLOP/s"),  # never beyond T
        (54.0, "ms", "54.0 ms"),
    ],
)
def test_rates_take_the_prefix_that_reads_best(value, unit, text):
    assert quantity(value, unit) == text


def test_the_site_never_prints_an_exponent():
    assert model.fmt(1834.5) == "1834" and model.fmt(None) == "–"
    assert model.fmt_rate(1834.5, "GB/s") == "1.83 TB/s" and model.fmt_rate(0.5, "TFLOP/s") == "500 GF/s"
    assert charts._num(0.00005) == "0.00005" and charts._num(2000) == "2k" and charts._num(15000) == "15k"
