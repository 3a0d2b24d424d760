"""Statistics of a before/after comparison: pure functions on lists of floats (times, any unit).

A change is called only when it is
  1. statistically significant: Mann-Whitney U on the samples, p < alpha;
  2. larger than a floor (default 3%); and
  3. larger than the noise seen for that benchmark on that machine (A/A runs: the same commit measured
     in separate sessions, whose medians on an H200 drift 1-18% with the kernel and the power state).
The size of the change is the Hodges-Lehmann estimate of the shift of log-times (a ratio after/before)
with its confidence interval from the order statistics of the pairwise differences. "Larger than" means
the whole interval lies beyond the threshold, so a verdict survives the uncertainty of the estimate.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

VERDICTS = ("slower", "faster", "unchanged", "ambiguous")

# Pairwise differences are n*m values: above this many, both sides are evenly thinned first.
_MAX_PAIRS = 4_000_000


@dataclass(frozen=True)
class Settings:
    floor: float = 0.03  # smallest relative change ever called
    alpha: float = 0.01  # significance level of the Mann-Whitney test
    confidence: float = 0.99  # of the ratio's interval
    noise_factor: float = 1.0  # a change must exceed this many times the benchmark's A/A noise
    min_samples: int = 5  # per side; fewer cannot support a test


@dataclass(frozen=True)
class Comparison:
    before: float  # median of the samples
    after: float
    ratio: float  # after / before, Hodges-Lehmann
    ci_low: float
    ci_high: float
    p_value: float
    threshold: float  # the relative change that had to be exceeded: max(floor, noise_factor * noise)
    verdict: str
    reason: str


def _thin(values: Sequence[float], keep: int) -> list[float]:
    if len(values) <= keep:
        return list(values)
    step = (len(values) - 1) / (keep - 1)
    return [values[round(i * step)] for i in range(keep)]


def hodges_lehmann_ratio(
    before: Sequence[float], after: Sequence[float], confidence: float = 0.99
) -> tuple[float, float, float]:
    """(ratio, low, high): the Hodges-Lehmann shift of log(after) - log(before), as a ratio, with its CI.

    The interval is the distribution-free one: the k-th smallest and largest pairwise differences, k from
    the normal approximation of the Mann-Whitney statistic.
    """
    _check_positive(before, "before")
    _check_positive(after, "after")
    side = int(math.sqrt(_MAX_PAIRS))
    b = np.log(np.asarray(_thin(sorted(before), side), dtype=float))
    a = np.log(np.asarray(_thin(sorted(after), side), dtype=float))
    diffs = np.sort((a[None, :] - b[:, None]).ravel())
    n, m, total = len(b), len(a), diffs.size
    z = scipy_stats.norm.ppf(0.5 + confidence / 2)
    k = int(math.floor(n * m / 2 - z * math.sqrt(n * m * (n + m + 1) / 12)))
    k = min(max(k, 0), (total - 1) // 2)
    return (float(math.exp(np.median(diffs))), float(math.exp(diffs[k])), float(math.exp(diffs[total - 1 - k])))


def mann_whitney_p(before: Sequence[float], after: Sequence[float]) -> float:
    """Two-sided p-value that the two samples come from one distribution (ties handled by scipy)."""
    if len(set(before)) == 1 and set(before) == set(after):
        return 1.0  # identical constants: scipy would divide by a zero variance
    return float(scipy_stats.mannwhitneyu(after, before, alternative="two-sided").pvalue)


def relative_spread(medians: Sequence[float]) -> float:
    """Noise of one benchmark from A/A runs: largest/smallest run median - 1 (0.05 = 5%)."""
    if len(medians) < 2:
        raise ValueError(f"noise needs at least 2 A/A runs of a benchmark, got {len(medians)}")
    _check_positive(medians, "medians")
    return max(medians) / min(medians) - 1.0


def threshold(settings: Settings, noise: float) -> float:
    return max(settings.floor, settings.noise_factor * max(noise, 0.0))


def compare_samples(
    before: Sequence[float],
    after: Sequence[float],
    noise: float = 0.0,
    settings: Settings | None = None,
    drift: float = 0.0,
) -> Comparison:
    """The verdict on one benchmark: slower, faster, unchanged or ambiguous, with the numbers behind it.

    `drift`: a change the machine itself made between the two runs (see compare.py); the threshold is at
    least that."""
    settings = settings or Settings()
    limit = max(threshold(settings, noise), drift)
    if min(len(before), len(after)) < settings.min_samples:
        med_b = statistics.median(before) if before else math.nan
        med_a = statistics.median(after) if after else math.nan
        ratio = med_a / med_b if before and after and med_b > 0 else math.nan
        return Comparison(
            med_b,
            med_a,
            ratio,
            math.nan,
            math.nan,
            math.nan,
            limit,
            "ambiguous",
            f"too few samples ({len(before)} before, {len(after)} after; "
            f"need {settings.min_samples}: record with --record-samples, not --quick)",
        )
    ratio, low, high = hodges_lehmann_ratio(before, after, settings.confidence)
    p = mann_whitney_p(before, after)
    band = math.log1p(limit)
    lo, hi = math.log(low), math.log(high)
    significant = p < settings.alpha
    pct = f"{limit:.1%}"
    if significant and lo > band:
        verdict, reason = "slower", f"p={p:.2g} and the whole interval is above +{pct}"
    elif significant and hi < -band:
        verdict, reason = "faster", f"p={p:.2g} and the whole interval is below -{pct}"
    elif -band <= lo and hi <= band:
        verdict = "unchanged"
        reason = f"interval within ±{pct}" + ("" if significant else f", p={p:.2g}")
    elif significant:
        verdict, reason = "ambiguous", f"p={p:.2g} but the interval crosses ±{pct}"
    else:
        verdict, reason = "ambiguous", f"not significant (p={p:.2g}) yet the interval reaches past ±{pct}"
    return Comparison(statistics.median(before), statistics.median(after), ratio, low, high, p, limit, verdict, reason)


def _check_positive(values: Sequence[float], what: str) -> None:
    if not values:
        raise ValueError(f"{what}: no samples")
    bad = [v for v in values if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"{what}: times must be finite and positive, got {bad[:3]}")
