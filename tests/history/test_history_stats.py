"""The verdict statistics and the noise model on synthetic data: what is called, and what is not."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tierbench.suite.history import noise
from tierbench.suite.history.compare_runs import RunNoise
from tierbench.suite.history.stats import (
    Noise,
    Settings,
    cross_session,
    decide,
    nominate,
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
    past = decide(math.log(1.05), 0.03, 20, s, "n", "round", 8)
    assert past.verdict == "ambiguous" and "more rounds would tell" in past.reason
    assert past.ci_low < 1 < past.ci_high


def test_a_nomination_is_one_sided_and_never_a_failure():
    s = Settings(floor=0.02, suspect_alpha=0.05)
    # z = 1.8: past the one-sided 5% quantile, short of the two-sided 1% one that `decide` needs.
    v = nominate(math.log(1.036), 0.02, math.inf, s, "n")
    assert v.verdict == "suspected" and "re-measure A/B" in v.reason
    assert v.confidence == pytest.approx(0.90) and v.ci_low > 1.0
    assert decide(math.log(1.036), 0.02, math.inf, s, "n", "session", 2).verdict == "ambiguous"
    assert nominate(math.log(1 / 1.036), 0.02, math.inf, s, "n").verdict == "faster"
    assert nominate(math.log(1.01), 0.0001, math.inf, s, "n").verdict == "unchanged"  # within the floor
    assert nominate(math.log(1.03), 0.02, math.inf, s, "n").verdict == "unchanged"  # within the noise


def test_threshold_names_what_set_it():
    s = Settings(floor=0.02)
    wide = decide(0.0, 0.02, 10, s, "noise of this series", "session", 2)
    assert wide.threshold == pytest.approx(math.expm1(t_quantile(0.99, 10) * 0.02))
    assert wide.threshold_source == "noise of this series"
    narrow = decide(0.0, 0.001, 10, s, "noise of this series", "session", 2)
    assert narrow.threshold == 0.02 and narrow.threshold_source == "floor 2%"


def test_cross_session_uses_the_noise_not_the_sample_count():
    base, head = times(seed=1), [t * 1.05 for t in times(seed=2)]
    assert cross_session(base, head, QUIET).verdict == "suspected"
    # With 200 tight samples per side a sample test would call this; 3% session noise does not.
    assert cross_session(base, head, NOISY).verdict == "unchanged"
    # A control is judged two-sided: its verdict says whether the machine moved.
    assert cross_session(base, head, QUIET, control=True).verdict == "slower"
    assert cross_session(base, head, NOISY, control=True).verdict == "ambiguous"


def test_cross_session_ratio_is_the_ratio_of_medians():
    base = times(seed=4)
    v = cross_session(base, [t * 1.25 for t in base], QUIET)
    assert v.ratio == pytest.approx(1.25, rel=1e-12) and v.unit == "session" and v.verdict == "suspected"


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


def _obs(key: str, group: str, session: int, value: float, run: str = "", own: bool = False) -> noise.Observation:
    return noise.Observation(key, "v1", group, session, session * 3600.0, math.log(value), run, own)


def test_runs_of_one_session_learn_the_within_part_only():
    fit = noise.fit_series([_obs("m.C.track_x", "g", 0, v) for v in (1.0, 1.01, 0.99)])
    assert fit.sessions == 1 and fit.between_df == 0 and fit.within_df == 2 and fit.runs == 3
    assert math.sqrt(fit.within_ss / 2) == pytest.approx(0.01, rel=0.01)


def test_sessions_chain_runs_started_close_together(project):
    from asv_result_files import write_result

    results = project / "results" / "asv"
    minute = 60_000
    for i, start in enumerate((0, 10 * minute, 25 * minute, 200 * minute)):  # 0-25 min chain; then a gap
        write_result(results, "m", f"{i}" * 40, {"m.C.track_x": {"a": [1.0, 1.0, 1.0]}}, started_at=start)
    from tierbench.suite.history import asvresults

    files = [asvresults.load(p) for p in asvresults.result_files(results, "m")]
    assert sorted(noise.sessions(files).values()) == [0, 0, 0, 1]


def test_between_session_spread_is_pooled_within_code_groups():
    obs = [_obs("m.C.track_x", "a", i, v) for i, v in enumerate((1.00, 1.02, 0.98))]
    obs += [_obs("m.C.track_x", "b", 10 + i, v) for i, v in enumerate((2.0, 2.04, 1.96))]  # other code
    model = noise.fit_model(obs, "gpu")
    fit = model.series["m.C.track_x"]
    assert fit.between_df == 4 and fit.sessions == 6
    assert 0.015 < math.sqrt(fit.between_ss / fit.between_df) < 0.025  # the 2x step between code states is not noise
    n = model.lookup("m.C.track_x", "v1")
    assert n.df == noise.PRIOR_DF + 4 and "over 6 sessions" in n.source


def test_one_run_across_sessions_carries_the_within_session_part():
    """Two runs per session: session means vary less than single runs do; a run-vs-run comparison adds back
    what the mean averaged away."""
    obs = []
    for session, level in enumerate((1.0, 1.03, 0.97, 1.0)):
        obs += [_obs("m.C.track_x", "g", session, level * f) for f in (1.02, 0.98)]
    model = noise.fit_model(obs, "gpu")
    fit = model.series["m.C.track_x"]
    assert fit.within_df == 4 and fit.between_df == 3 and fit.inv_runs == pytest.approx(0.5)
    within, between = fit.within_ss / fit.within_df, fit.between_ss / fit.between_df
    prior = model.priors["m"]
    shrunk_b = (noise.PRIOR_DF * prior.between**2 + fit.between_ss) / (noise.PRIOR_DF + 3)
    shrunk_w = (noise.PRIOR_DF * prior.within**2 + fit.within_ss) / (noise.PRIOR_DF + 4)
    assert model.lookup("m.C.track_x").sigma == pytest.approx(math.sqrt(shrunk_b + shrunk_w * 0.5))
    assert within > 0 and between > 0


def test_a_series_without_history_gets_its_family_prior():
    obs = [_obs("norm.N.track_a", "g", i, v) for i, v in enumerate((1.0, 1.01, 0.99, 1.0))]
    obs += [_obs("norm.N.track_b", "g", i, v) for i, v in enumerate((1.0, 1.03, 0.97, 1.0))]
    obs += [_obs("norm.N.track_new", "g", 0, 1.0)]
    model = noise.fit_model(obs, "gpu")
    prior = model.priors["norm"]
    pooled = math.sqrt((model.series["norm.N.track_a"].between_ss + model.series["norm.N.track_b"].between_ss) / 6)
    assert prior.sigma == pytest.approx(pooled)  # one run per session: nothing to add back
    n = model.lookup("norm.N.track_new")
    assert n.sigma == pytest.approx(pooled) and n.df == noise.PRIOR_DF and "prior" in n.source
    unknown = noise.NoiseModel("gpu").lookup("attention.A.track_x")
    assert unknown.sigma == noise.DEFAULT_PRIOR_SIGMA and "no history on this machine" in unknown.source


def test_a_volatile_provider_does_not_set_the_others_prior():
    """XLA's series moving 30% between sessions must not hold the family's steady series to that spread: each
    provider with two or more series is shrunk toward its own pool; one with a single series, toward the
    family's."""
    obs = []
    for case in ("a", "b", "c"):
        obs += [_obs(f"norm.N.track_triton('{case}')", "g", i, v) for i, v in enumerate((1.0, 1.002, 0.998, 1.0))]
        obs += [_obs(f"norm.N.track_xla('{case}')", "g", i, v) for i, v in enumerate((1.0, 1.4, 0.7, 1.2))]
    obs += [_obs("norm.N.track_eager('a')", "g", i, v) for i, v in enumerate((1.0, 1.01, 0.99, 1.0))]
    model = noise.fit_model(obs, "gpu")
    assert model.priors["norm:triton"].sigma < 0.005 and model.priors["norm:xla"].sigma > 0.2
    assert "norm:eager" not in model.priors  # one series: no provider pool of its own
    assert model.priors["norm"].sigma > 0.1  # the family's pool holds XLA
    triton = model.lookup("norm.N.track_triton('a')")
    assert triton.sigma < 0.005 and "norm's triton" in triton.source
    assert model.lookup("norm.N.track_eager('a')").sigma > 0.05  # shrunk toward the family's prior
    new = model.lookup("norm.N.track_triton('d')")  # no history: its provider's prior
    assert new.sigma == pytest.approx(model.priors["norm:triton"].sigma) and new.df == noise.PRIOR_DF


def test_records_compared_across_runs_take_their_providers_prior():
    """`tierbench compare RUN RUN --noise MODEL`: a record's row is judged against its provider's prior in the
    family where the model has one, else the family's."""
    obs = []
    for case in ("a", "b", "c"):
        obs += [_obs(f"norm.N.track_triton('{case}')", "g", i, v) for i, v in enumerate((1.0, 1.002, 0.998, 1.0))]
        obs += [_obs(f"norm.N.track_xla('{case}')", "g", i, v) for i, v in enumerate((1.0, 1.4, 0.7, 1.2))]
    model = noise.fit_model(obs, "gpu")
    runs = RunNoise(model, "a model")
    runs.note("row t", "norm", "triton")
    runs.note("row e", "norm", "eager")
    assert runs.lookup("row t").sigma == pytest.approx(model.priors["norm:triton"].sigma)
    assert runs.lookup("row e").sigma == pytest.approx(model.priors["norm"].sigma)  # no eager pool: the family


def _runs_with_a_shared_factor(control_noise: float) -> list[noise.Observation]:
    """Own series and a control measured in the same runs; each run's machine factor hits both."""
    rng = np.random.default_rng(3)
    obs = []
    for session in range(3):
        for run in range(4):
            factor = math.exp(rng.normal(0, 0.03))
            name = f"r{session}-{run}"
            obs.append(_obs("matmul.M.track_mine('a')", "code x", session, factor * 1.0, name, own=True))
            ctrl = factor * math.exp(rng.normal(0, control_noise))
            obs.append(_obs("matmul.M.track_vendor('a')", "env e", session, ctrl * 2.0, name))
    return obs


def test_a_control_that_shares_the_runs_noise_becomes_the_normaliser():
    model = noise.fit_model(_runs_with_a_shared_factor(0.002), "gpu")
    chosen = model.normaliser("matmul.M.track_mine('a')")
    assert chosen is not None and chosen.control == "vendor" and chosen.df == 9
    assert chosen.sd < 0.5 * chosen.raw_sd and "divided by vendor" in chosen.source


def test_a_control_that_does_not_help_is_not_used():
    model = noise.fit_model(_runs_with_a_shared_factor(0.05), "gpu")  # its own noise swamps the shared part
    assert model.normaliser("matmul.M.track_mine('a')") is None


def test_noise_model_round_trips(tmp_path):
    obs = [_obs("norm.N.track_a", "g", i, v) for i, v in enumerate((1.0, 1.01, 0.99))]
    model = noise.fit_model(_runs_with_a_shared_factor(0.002) + obs, "gpu")
    path = noise.save(model, tmp_path / "gpu.json")
    again = noise.load_model(path)
    assert again.lookup("norm.N.track_a", "v1") == model.lookup("norm.N.track_a", "v1")
    assert again.normalisers == model.normalisers and again.normalisers
    stamp = path.stat().st_mtime_ns
    relearned = noise.fit_model(_runs_with_a_shared_factor(0.002) + obs, "gpu")
    relearned.created = model.created + 60.0
    noise.save(relearned, path)  # the same model learned again: the file is left as it was
    assert path.stat().st_mtime_ns == stamp
    (tmp_path / "old.json").write_text('{"format": 2}')
    with pytest.raises(noise.ResultsError, match="learn it again"):
        noise.load_model(tmp_path / "old.json")
