"""The verdict statistics and the noise model on synthetic data: what is called, and what is not."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tierbench.suite.history import noise
from tierbench.suite.history.stats import (
    Noise,
    Settings,
    cross_session,
    decide,
    paired_rounds,
    t_quantile,
    two_sided_p,
)


def times(n: int = 200, median: float = 100e-6, spread: float = 0.01, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return (median * np.exp(rng.normal(0.0, spread, n))).tolist()


QUIET = Noise(0.005, 30, "test: 0.5% between sessions")
NOISY = Noise(0.03, 30, "test: 3% between sessions")


def test_t_quantile_and_p_value_agree():
    q = t_quantile(0.99, 7)
    assert q == pytest.approx(3.4995, abs=1e-3)
    assert two_sided_p(q, 7) == pytest.approx(0.01, rel=1e-6)
    assert t_quantile(0.99, math.inf) == pytest.approx(2.5758, abs=1e-3)


def test_decide_rules():
    s = Settings(floor=0.02)
    assert decide(math.log(1.10), 0.01, 20, s, "n", "session", 2).verdict == "slower"
    assert decide(math.log(1 / 1.10), 0.01, 20, s, "n", "session", 2).verdict == "faster"
    assert decide(math.log(1.01), 0.001, 20, s, "n", "session", 2).verdict == "unchanged"  # significant, small
    past = decide(math.log(1.05), 0.03, 20, s, "n", "session", 2)
    assert past.verdict == "ambiguous" and "confirm with A/B" in past.reason
    assert past.ci_low < 1 < past.ci_high


def test_threshold_names_what_set_it():
    s = Settings(floor=0.02)
    wide = decide(0.0, 0.02, 10, s, "noise of this series", "session", 2)
    assert wide.threshold == pytest.approx(math.expm1(t_quantile(0.99, 10) * 0.02))
    assert wide.threshold_source == "noise of this series"
    narrow = decide(0.0, 0.001, 10, s, "noise of this series", "session", 2)
    assert narrow.threshold == 0.02 and narrow.threshold_source == "floor 2%"


def test_cross_session_uses_the_noise_not_the_sample_count():
    base, head = times(seed=1), [t * 1.05 for t in times(seed=2)]
    assert cross_session(base, head, QUIET).verdict == "slower"
    # With 200 tight samples per side a sample test would call this; 3% session noise does not.
    assert cross_session(base, head, NOISY).verdict == "ambiguous"
    assert cross_session(base, [t * 1.0 for t in times(seed=3)], NOISY).verdict == "unchanged"


def test_cross_session_ratio_is_the_ratio_of_medians():
    base = times(seed=4)
    v = cross_session(base, [t * 1.25 for t in base], QUIET)
    assert v.ratio == pytest.approx(1.25, rel=1e-12) and v.unit == "session" and v.verdict == "slower"


def test_too_few_samples_is_ambiguous():
    v = cross_session([1.0, 1.1], [2.0, 2.1], QUIET)
    assert v.verdict == "ambiguous" and "too few samples" in v.reason


def _rounds(k: int, factor: float, sd: float = 0.005, seed: int = 0):
    rng = np.random.default_rng(seed)
    drift = np.cumsum(rng.normal(0, 0.02, k))  # the machine drifts a lot between rounds...
    base = [times(40, 1e-3 * math.exp(d), 0.01, seed + i) for i, d in enumerate(drift)]
    head = [
        [t * factor * math.exp(rng.normal(0, sd)) for t in times(40, 1e-3 * math.exp(d), 0.01, 100 + seed + i)]
        for i, d in enumerate(drift)
    ]
    return base, head


def test_paired_rounds_see_through_drift_that_hits_both():
    base, head = _rounds(8, 1.03)
    v = paired_rounds(base, head)
    assert v.verdict == "slower" and v.unit == "round" and v.n == 8
    assert v.ratio == pytest.approx(1.03, abs=0.01)
    assert paired_rounds(*_rounds(8, 1.0, seed=5)).verdict == "unchanged"


def test_paired_rounds_need_rounds():
    base, head = _rounds(2, 1.5)
    v = paired_rounds(base, head)
    assert v.verdict == "ambiguous" and "2 paired rounds" in v.reason
    with pytest.raises(ValueError, match="3 base rounds but 2 head rounds"):
        paired_rounds(base + base[:1], head)


def test_bad_times_raise_clear_errors():
    with pytest.raises(ValueError, match="finite and positive"):
        cross_session([1.0, -1.0, 2.0], [1.0, 2.0, 3.0], QUIET)
    with pytest.raises(ValueError, match="finite and positive"):
        cross_session([1.0, math.nan, 2.0], [1.0, 2.0, 3.0], QUIET)


# -- the noise model ------------------------------------------------------------------------------------------


def _obs(key: str, group: str, t: float, value: float) -> noise.Observation:
    return noise.Observation(key, "v1", group, t, math.log(value))


def test_runs_closer_than_the_gap_are_one_session():
    assert noise.merge_close([(0, 1.0), (60, 3.0), (5000, 5.0)], 1800) == [2.0, 5.0]
    fit = noise.fit_series([_obs("m.C.track_x", "g", t, v) for t, v in ((0, 1.0), (10, 1.0), (20, 1.0))])
    assert fit.sessions == 1 and fit.df == 0 and fit.runs == 3  # back-to-back A/A runs: no spread learned


def test_between_session_spread_is_pooled_within_code_groups():
    hour = 3600.0
    obs = [_obs("m.C.track_x", "a", i * hour, v) for i, v in enumerate((1.00, 1.02, 0.98))]
    obs += [_obs("m.C.track_x", "b", (10 + i) * hour, v) for i, v in enumerate((2.0, 2.04, 1.96))]  # other code
    model = noise.fit_model(obs, "gpu")
    fit = model.series["m.C.track_x"]
    assert fit.df == 4 and fit.sessions == 6
    expected = math.sqrt(fit.ss / fit.df)
    assert 0.015 < expected < 0.025  # the 2x step between code states is not noise
    n = model.lookup("m.C.track_x", "v1")
    assert n.df == noise.PRIOR_DF + 4 and "over 6 sessions" in n.source


def test_a_series_without_history_gets_its_family_prior():
    hour = 3600.0
    obs = [_obs("norm.N.track_a", "g", i * hour, v) for i, v in enumerate((1.0, 1.01, 0.99, 1.0))]
    obs += [_obs("norm.N.track_b", "g", i * hour, v) for i, v in enumerate((1.0, 1.03, 0.97, 1.0))]
    obs += [_obs("norm.N.track_new", "g", 0.0, 1.0)]
    model = noise.fit_model(obs, "gpu")
    prior = model.priors["norm"]
    pooled = math.sqrt((model.series["norm.N.track_a"].ss + model.series["norm.N.track_b"].ss) / 6)
    assert prior.sigma == pytest.approx(pooled)
    n = model.lookup("norm.N.track_new")
    assert n.sigma == pytest.approx(pooled) and n.df == noise.PRIOR_DF and "prior" in n.source
    unknown = noise.NoiseModel("gpu").lookup("attention.A.track_x")
    assert unknown.sigma == noise.DEFAULT_PRIOR_SIGMA and "no history on this machine" in unknown.source


def test_noise_model_round_trips(tmp_path):
    hour = 3600.0
    obs = [_obs("norm.N.track_a", "g", i * hour, v) for i, v in enumerate((1.0, 1.01, 0.99))]
    model = noise.fit_model(obs, "gpu")
    path = noise.save(model, tmp_path / "gpu.json")
    again = noise.load_model(path)
    assert again.lookup("norm.N.track_a", "v1") == model.lookup("norm.N.track_a", "v1")
    (tmp_path / "old.json").write_text('{"format": 1}')
    with pytest.raises(noise.ResultsError, match="learn it again"):
        noise.load_model(tmp_path / "old.json")
