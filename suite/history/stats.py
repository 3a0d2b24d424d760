"""The verdict statistics: pure functions on times (any unit), with the unit of replication made explicit.

Timing samples of one session are not independent: on an H200 they sit at one level for ten or twenty
repetitions, then jump by several percent, and whole sessions of unchanged code differ by 1-10%. A test
that treats samples as independent reads that drift as a change. So every verdict here is made on units
that do replicate, and only one kind of verdict can fail a run:

- **across sessions** (a nightly against the previous one): the unit is the session. Each side is one run's
  median; the noise is the series' learned spread of one run between sessions (noise.py), so the log-ratio
  of two runs has standard error sqrt(2) * sigma on the model's degrees of freedom. A cross-session
  comparison cannot tell a change of the code from a change of the machine, so it only **nominates**:
  `suspected` when the estimate is at least the floor and the one-sided p of "slower" is below
  `suspect_alpha` (`nominate`); `faster` the mirror; `unchanged` otherwise. A control series (code this
  project does not build) is judged two-sided at `alpha` (`decide`): one that moved is machine drift.
- **paired A/B** (both commits measured in one session, alternating round by round): the unit is the
  round. Each round gives log(median head / median base); their mean, spread and count give a t interval
  that needs no noise model, since the rounds measure their own noise. This is the **confirmation**:
  `slower` when the (1 - alpha) interval of the ratio lies above 1 and the estimate is at least the floor
  (`decide`); `faster` the mirror; `unchanged` when the estimate is within the floor; `ambiguous` when the
  estimate is past the floor but the interval still contains 1, or when there are too few rounds.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

VERDICTS = ("slower", "faster", "unchanged", "ambiguous")  # of `decide`: the A/B rule and a control's drift
NOMINATIONS = ("suspected", "faster", "unchanged")  # of `nominate`: an own series across sessions


@dataclass(frozen=True)
class Settings:
    floor: float = 0.02  # smallest relative change ever called, on the estimate
    alpha: float = 0.01  # two-sided, of the A/B's and a control's verdict: the interval is the (1 - alpha) one
    suspect_alpha: float = 0.05  # one-sided, of a nomination across sessions (a suspect costs one A/B)
    min_rounds: int = 3  # paired rounds needed for an A/B verdict
    min_samples: int = 3  # samples a session median needs

    @property
    def confidence(self) -> float:
        return 1.0 - self.alpha


@dataclass(frozen=True)
class Noise:
    """The noise a cross-session verdict is judged against: the sd of a session's log-median."""

    sigma: float
    df: float  # degrees of freedom behind sigma (history plus prior)
    source: str  # where it came from, for the reader


@dataclass(frozen=True)
class Verdict:
    verdict: str  # one of VERDICTS
    before: float  # median time of the base (over its sessions or rounds)
    after: float
    ratio: float  # after / before, the estimate
    ci_low: float  # the (1 - alpha) interval of the ratio
    ci_high: float
    p_value: float  # two-sided, of no change
    threshold: float  # smallest relative change this comparison can call: max(floor, interval half-width)
    threshold_source: str  # what set the threshold: the floor, or the noise and where it came from
    unit: str  # "session" or "round": what was replicated
    n: int  # sessions or rounds behind the verdict
    reason: str
    # (1 - 2 * suspect_alpha) for a nomination (its one-sided test reads off the interval), else (1 - alpha)
    confidence: float = 0.99

    def as_dict(self) -> dict:
        return {k: _finite_or_none(v) for k, v in self.__dict__.items()}


def _finite_or_none(value):
    return None if isinstance(value, float) and not math.isfinite(value) else value


@functools.lru_cache(maxsize=256)
def t_quantile(confidence: float, df: float) -> float:
    """Two-sided quantile of Student's t (the normal one for infinite df)."""
    q = 0.5 + confidence / 2
    return float(special.ndtri(q) if math.isinf(df) else special.stdtrit(df, q))


def two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t on df degrees of freedom (normal for infinite df)."""
    tail = special.ndtr(-abs(t)) if math.isinf(df) else special.stdtr(df, -abs(t))
    return float(2 * tail)


def median(samples: Sequence[float]) -> float:
    """Median of times, which must be finite and positive."""
    values = check_positive(samples, "samples")
    return float(np.median(values))


def log_median(samples: Sequence[float]) -> float:
    """log of a session's (or round's) median time."""
    return math.log(median(samples))


def decide(
    log_ratio: float,
    se: float,
    df: float,
    settings: Settings,
    noise_source: str,
    unit: str,
    n: int,
    before: float = math.nan,
    after: float = math.nan,
) -> Verdict:
    """The verdict on an estimated log-ratio after/before with standard error `se` on `df` degrees of freedom."""
    half = t_quantile(settings.confidence, df) * se
    band = math.log1p(settings.floor)
    lo, hi = log_ratio - half, log_ratio + half
    p = two_sided_p(log_ratio / se, df) if se > 0 else (0.0 if log_ratio else 1.0)
    threshold = max(settings.floor, math.expm1(half))
    source = f"floor {settings.floor:.0%}" if settings.floor >= math.expm1(half) else noise_source
    est = f"{math.expm1(log_ratio):+.1%}"
    if lo > 0 and log_ratio >= band:
        verdict, reason = "slower", f"{est}: the {settings.confidence:.0%} interval lies above 1, p={p:.2g}"
    elif hi < 0 and log_ratio <= -band:
        verdict, reason = "faster", f"{est}: the {settings.confidence:.0%} interval lies below 1, p={p:.2g}"
    elif abs(log_ratio) < band:
        verdict, reason = "unchanged", f"{est} is within the {settings.floor:.0%} floor"
    else:
        verdict = "ambiguous"
        more = "more rounds would tell" if unit == "round" else "an A/B run would tell"
        reason = f"{est} is past the floor, but within the noise (p={p:.2g}, {unit}s: {n}): {more}"
    return Verdict(
        verdict,
        before,
        after,
        math.exp(log_ratio),
        math.exp(lo),
        math.exp(hi),
        p,
        threshold,
        source,
        unit,
        n,
        reason,
        settings.confidence,
    )


def nominate(
    log_ratio: float,
    se: float,
    df: float,
    settings: Settings,
    noise_source: str,
    n: int = 2,
    before: float = math.nan,
    after: float = math.nan,
) -> Verdict:
    """The cross-session nomination of an own series: `suspected` (worth an A/B), `faster` or `unchanged`.

    One-sided at `suspect_alpha` on each side, so its interval is the (1 - 2 suspect_alpha) one; nothing it
    says fails a run."""
    confidence = 1.0 - 2.0 * settings.suspect_alpha
    half = t_quantile(confidence, df) * se
    band = math.log1p(settings.floor)
    lo, hi = log_ratio - half, log_ratio + half
    p = two_sided_p(log_ratio / se, df) if se > 0 else (0.0 if log_ratio else 1.0)
    threshold = max(settings.floor, math.expm1(half))
    source = f"floor {settings.floor:.0%}" if settings.floor >= math.expm1(half) else noise_source
    est = f"{math.expm1(log_ratio):+.1%}"
    one_sided = f"one-sided p={p / 2:.2g}"
    if lo > 0 and log_ratio >= band:
        verdict, reason = "suspected", f"{est} across sessions ({one_sided}): re-measure A/B to confirm"
    elif hi < 0 and log_ratio <= -band:
        verdict, reason = "faster", f"{est} across sessions ({one_sided}); not re-measured"
    elif abs(log_ratio) < band:
        verdict, reason = "unchanged", f"{est} is within the {settings.floor:.0%} floor"
    else:
        verdict, reason = "unchanged", f"{est} is within this series' noise across sessions (p={p:.2g})"
    return Verdict(
        verdict,
        before,
        after,
        math.exp(log_ratio),
        math.exp(lo),
        math.exp(hi),
        p,
        threshold,
        source,
        "session",
        n,
        reason,
        confidence,
    )


def too_little(reason: str, unit: str, n: int, settings: Settings, before: float, after: float) -> Verdict:
    ratio = after / before if before > 0 and math.isfinite(after) else math.nan
    nan = math.nan
    return Verdict("ambiguous", before, after, ratio, nan, nan, nan, settings.floor, "", unit, n, reason)


def cross_session(
    before: Sequence[float],
    after: Sequence[float],
    noise: Noise,
    settings: Settings | None = None,
    control: bool = False,
) -> Verdict:
    """Two sessions' samples of one series, their medians judged against the series' noise across sessions:
    an own series' nomination (`nominate`), a control's drift (`decide`)."""
    settings = settings or Settings()
    med_b = median(before) if len(before) else math.nan
    med_a = median(after) if len(after) else math.nan
    if min(len(before), len(after)) < settings.min_samples:
        why = f"too few samples ({len(before)} before, {len(after)} after; need {settings.min_samples})"
        return too_little(why, "session", 2, settings, med_b, med_a)
    return session_medians(med_b, med_a, noise, settings, control)


def session_medians(before: float, after: float, noise: Noise, settings: Settings, control: bool = False) -> Verdict:
    """The cross-session rule on two session medians: a nomination, or for a control its drift."""
    d = math.log(after) - math.log(before)
    se = math.sqrt(2.0) * noise.sigma
    if control:
        return decide(d, se, noise.df, settings, noise.source, "session", 2, before, after)
    return nominate(d, se, noise.df, settings, noise.source, 2, before, after)


def paired_rounds(
    base_rounds: Sequence[Sequence[float]],
    head_rounds: Sequence[Sequence[float]],
    settings: Settings | None = None,
) -> Verdict:
    """A/B in one session: round i measured both commits back to back (order alternating between rounds)."""
    settings = settings or Settings()
    if len(base_rounds) != len(head_rounds):
        raise ValueError(f"paired rounds: {len(base_rounds)} base rounds but {len(head_rounds)} head rounds")
    pairs = [(median(b), median(h)) for b, h in zip(base_rounds, head_rounds) if len(b) and len(h)]
    return round_medians([b for b, _ in pairs], [h for _, h in pairs], settings)


def round_medians(base: Sequence[float], head: Sequence[float], settings: Settings) -> Verdict:
    """The paired rule on per-round medians: round i of `base` and of `head` were measured back to back."""
    # Plain Python on a handful of rounds: the replay (validate.py) calls this hundreds of thousands of times.
    k = len(base)
    med_b = statistics.median(base) if k else math.nan
    med_a = statistics.median(head) if k else math.nan
    if k < settings.min_rounds:
        return too_little(f"{k} paired rounds (need {settings.min_rounds})", "round", k, settings, med_b, med_a)
    r = [math.log(h) - math.log(b) for b, h in zip(base, head)]
    mean = math.fsum(r) / k
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in r) / (k - 1))
    source = f"round-to-round noise of this A/B run ({k} rounds, sd {math.expm1(sd):.1%})"
    return decide(mean, sd / math.sqrt(k), k - 1, settings, source, "round", k, float(med_b), float(med_a))


def check_positive(values: Sequence[float], what: str) -> np.ndarray:
    """The values as an array; a ValueError naming `what` unless all are finite, positive numbers."""
    if not len(values):
        raise ValueError(f"{what}: no samples")
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: times must be numbers, got {list(values)[:3]}") from None
    bad = array[~(np.isfinite(array) & (array > 0))]
    if bad.size:
        raise ValueError(f"{what}: times must be finite and positive, got {bad[:3].tolist()}")
    return array
