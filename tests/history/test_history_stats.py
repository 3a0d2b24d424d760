"""The verdict statistics on synthetic samples: what is called, and what is not."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tierbench.suite.history.stats import (
    Settings,
    compare_samples,
    hodges_lehmann_ratio,
    mann_whitney_p,
    relative_spread,
)


def times(n: int = 200, median: float = 100e-6, spread: float = 0.01, seed: int = 0) -> list[float]:
    """Kernel-like times: lognormal around `median` with a relative spread, and a few slow outliers."""
    rng = np.random.default_rng(seed)
    t = median * np.exp(rng.normal(0.0, spread, n))
    t[rng.choice(n, n // 50, replace=False)] *= 1.3  # the odd rep behind a clock dip
    return t.tolist()


def test_identical_distributions_are_unchanged():
    c = compare_samples(times(seed=1), times(seed=2))
    assert c.verdict == "unchanged", c
    assert c.ci_low < 1.0 < c.ci_high and abs(c.ratio - 1) < 0.01


def test_ten_percent_slower_is_called_with_its_ratio():
    base = times(seed=1)
    c = compare_samples(base, [t * 1.10 for t in times(seed=2)])
    assert c.verdict == "slower", c
    assert c.ratio == pytest.approx(1.10, abs=0.01)
    assert 1.03 < c.ci_low < 1.10 < c.ci_high < 1.13
    assert c.p_value < 1e-10


def test_ten_percent_faster_is_called():
    assert compare_samples(times(seed=1), [t / 1.10 for t in times(seed=2)]).verdict == "faster"


def test_one_percent_shift_is_under_the_floor():
    c = compare_samples(times(seed=1, spread=0.002), [t * 1.01 for t in times(seed=2, spread=0.002)])
    assert c.p_value < 1e-6  # significant...
    assert c.verdict == "unchanged", c  # ...but smaller than the 3% floor


def test_five_percent_shift_on_a_noisy_benchmark_is_not_called():
    base, head = times(seed=1), [t * 1.05 for t in times(seed=2)]
    assert compare_samples(base, head, noise=0.0).verdict == "slower"  # a quiet benchmark: called
    quiet_in_this_run = compare_samples(base, head, noise=0.15)  # its A/A runs moved 15%
    assert quiet_in_this_run.verdict == "unchanged", quiet_in_this_run
    assert quiet_in_this_run.threshold == pytest.approx(0.15)


def test_noise_factor_scales_the_noise_threshold():
    base, head = times(seed=1), [t * 1.08 for t in times(seed=2)]
    assert compare_samples(base, head, noise=0.05).verdict == "slower"
    assert compare_samples(base, head, noise=0.05, settings=Settings(noise_factor=2.0)).verdict == "unchanged"


def test_a_change_straddling_the_threshold_is_ambiguous():
    # Wide samples: the interval around a ~4% shift reaches both sides of the 3% floor.
    c = compare_samples(times(n=60, seed=1, spread=0.08), [t * 1.045 for t in times(n=60, seed=2, spread=0.08)])
    assert c.verdict == "ambiguous", c


def test_too_few_samples_is_ambiguous_with_a_reason():
    c = compare_samples([1.0, 1.1], [2.0, 2.1])
    assert c.verdict == "ambiguous" and "too few samples" in c.reason
    assert c.ratio == pytest.approx(2.05 / 1.05)


def test_hodges_lehmann_of_a_pure_scaling_is_exact():
    base = times(n=101, seed=3)
    ratio, low, high = hodges_lehmann_ratio(base, [t * 1.25 for t in base])
    assert ratio == pytest.approx(1.25, rel=1e-12)
    assert low < 1.25 < high


def test_mann_whitney_handles_constant_samples():
    assert mann_whitney_p([1.0] * 10, [1.0] * 10) == 1.0
    assert mann_whitney_p([1.0] * 10, [2.0] * 10) < 1e-3


def test_relative_spread_of_a_and_a_medians():
    assert relative_spread([100.0, 110.0, 105.0]) == pytest.approx(0.10)
    with pytest.raises(ValueError, match="at least 2"):
        relative_spread([1.0])


def test_bad_times_raise_clear_errors():
    with pytest.raises(ValueError, match="finite and positive"):
        hodges_lehmann_ratio([1.0, -1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="finite and positive"):
        hodges_lehmann_ratio([1.0, math.nan], [1.0, 2.0])
