"""The noise model: per series and machine, how far a session's median moves between sessions of unchanged code.

Learned from the history itself and from A/A runs:
- a **control** series (a provider this project does not build) runs the same code in every session of one
  benchmark version and environment, so all its sessions count;
- a series of the project's **own** code counts the sessions of one code state: one commit, or commits
  whose own-code tree is the same (`code_id`), e.g. A/A runs and commits that changed only docs.

Runs closer together than `min_gap_s` (back-to-back A/A runs, commits measured in one sitting) are merged
into one session: they share the machine's state, and counting them apart is how an A/A model ends up
below the drift it is meant to measure. The spread is the pooled within-group variance of session
log-medians. Each series is shrunk toward a **prior**, the pooled variance of its family on the machine
(every series of matmul, norm or attention), worth `prior_df` degrees of freedom: a series with little
history is held to its family's spread, never to the machine's single worst series. With no history on the
machine at all, DEFAULT_PRIOR_SIGMA is the prior, stated in every verdict that uses it.

A/A runs are kept in results/noise/<machine>/runs/<commit8>-<n>/<machine>/ (outside results/asv, where asv
would take every JSON for a result), the model in results/noise/<machine>.json.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .asvresults import NOT_RESULTS, ResultFile, ResultsError, load
from .stats import Noise, log_median

NOISE_FORMAT = 2
MIN_SESSION_GAP_S = 1800.0  # runs closer than this share a session
PRIOR_DF = 4.0  # weight of the family prior, in degrees of freedom
# The prior where a machine has no history at all: on an H200 the between-session sd of a series of
# unchanged code ranged from 0.1% to 3.7%; a new machine is held to the top of that range.
DEFAULT_PRIOR_SIGMA = 0.03


@dataclass(frozen=True)
class Observation:
    """One session median of one series."""

    key: str
    version: str | None
    group: str  # sessions of one group ran the same code
    started_s: float  # when the session measured it
    log_median: float
    source: str = ""  # the result file, for the record


@dataclass
class SeriesFit:
    version: str | None
    ss: float  # pooled sum of squared deviations of session log-medians from their group means
    df: int  # degrees of freedom behind ss: sessions minus groups
    sessions: int  # sessions after merging runs closer than the gap
    runs: int  # result files behind them


@dataclass
class Prior:
    sigma: float
    df: float  # degrees of freedom of the pooled estimate (not its weight: that is PRIOR_DF)
    series: int  # series pooled
    source: str


@dataclass
class NoiseModel:
    machine: str
    series: dict[str, SeriesFit] = field(default_factory=dict)
    priors: dict[str, Prior] = field(default_factory=dict)  # per family, and "*" for the whole machine
    min_gap_s: float = MIN_SESSION_GAP_S
    prior_df: float = PRIOR_DF
    files: int = 0
    created: float = field(default_factory=time.time)
    format: int = NOISE_FORMAT

    def prior(self, key: str) -> Prior:
        return self.priors.get(family_of(key)) or self.priors.get("*") or default_prior()

    def lookup(self, key: str, version: str | None = None) -> Noise:
        """The between-session noise of a series: its own history shrunk toward its family's prior."""
        prior = self.prior(key)
        fit = self.series.get(key)
        if fit is None or (version is not None and fit.version != version) or fit.df == 0:
            why = "no history of this series" if fit is None or fit.df == 0 else "no history of this version"
            return Noise(prior.sigma, self.prior_df, f"{why}: prior {prior.source}")
        var = (self.prior_df * prior.sigma**2 + fit.ss) / (self.prior_df + fit.df)
        own = math.sqrt(fit.ss / fit.df)
        return Noise(
            math.sqrt(var),
            self.prior_df + fit.df,
            f"between-session noise of this series on {self.machine}: sd {own:.2%} over {fit.sessions} sessions "
            f"(df {fit.df}), shrunk toward prior {prior.source}",
        )


def default_prior() -> Prior:
    return Prior(DEFAULT_PRIOR_SIGMA, 0.0, 0, f"sd {DEFAULT_PRIOR_SIGMA:.1%} (no history on this machine)")


def family_of(key: str) -> str:
    """The op family of an asv name `module.Class.track_provider(params)`: its module (matmul, norm...)."""
    return key.split(".", 1)[0]


def merge_close(times_and_values: list[tuple[float, float]], min_gap_s: float) -> list[float]:
    """Values in time order, those closer than `min_gap_s` to the previous one merged (their mean)."""
    merged: list[list[float]] = []
    last = -math.inf
    for t, v in sorted(times_and_values):
        if merged and t - last < min_gap_s:
            merged[-1].append(v)
        else:
            merged.append([v])
        last = t
    return [sum(m) / len(m) for m in merged]


def fit_series(observations: Iterable[Observation], min_gap_s: float = MIN_SESSION_GAP_S) -> SeriesFit:
    """Pooled within-group spread of one series' session log-medians (one version)."""
    groups: dict[str, list[tuple[float, float]]] = {}
    version, runs = None, 0
    for o in observations:
        groups.setdefault(o.group, []).append((o.started_s, o.log_median))
        version, runs = o.version, runs + 1
    ss, df, sessions = 0.0, 0, 0
    for values in groups.values():
        merged = merge_close(values, min_gap_s)
        mean = sum(merged) / len(merged)
        ss += sum((v - mean) ** 2 for v in merged)
        df += len(merged) - 1
        sessions += len(merged)
    return SeriesFit(version, ss, df, sessions, runs)


def pooled_prior(fits: Iterable[SeriesFit], what: str) -> Prior | None:
    fits = [f for f in fits if f.df > 0]
    df = sum(f.df for f in fits)
    if not df:
        return None
    sigma = math.sqrt(sum(f.ss for f in fits) / df)
    return Prior(sigma, df, len(fits), f"sd {sigma:.2%} pooled over {len(fits)} series of {what} (df {df})")


def fit_model(
    observations: Iterable[Observation], machine: str, min_gap_s: float = MIN_SESSION_GAP_S, files: int = 0
) -> NoiseModel:
    """The model from observations: per series its newest version's fit, per family the pooled prior."""
    by_series = group_series(observations)
    fits = {key_version: fit_series(obs, min_gap_s) for key_version, obs in by_series.items()}
    return model_from_fits(fits, newest_versions(by_series), machine, min_gap_s, files)


def group_series(observations: Iterable[Observation]) -> dict[tuple[str, str | None], list[Observation]]:
    by_series: dict[tuple[str, str | None], list[Observation]] = {}
    for o in observations:
        by_series.setdefault((o.key, o.version), []).append(o)
    return by_series


def newest_versions(by_series: dict[tuple[str, str | None], list[Observation]]) -> dict[str, str | None]:
    """Per series, the version of its latest session."""
    newest: dict[str, tuple[float, str | None]] = {}
    for (key, version), obs in by_series.items():
        latest = max(o.started_s for o in obs)
        if latest >= newest.get(key, (-math.inf, None))[0]:
            newest[key] = (latest, version)
    return {key: version for key, (_, version) in newest.items()}


def model_from_fits(
    fits: dict[tuple[str, str | None], SeriesFit],
    newest: dict[str, str | None],
    machine: str,
    min_gap_s: float = MIN_SESSION_GAP_S,
    files: int = 0,
) -> NoiseModel:
    model = NoiseModel(machine=machine, min_gap_s=min_gap_s, files=files)
    for key, version in newest.items():
        model.series[key] = fits[(key, version)]
    families: dict[str, list[SeriesFit]] = {}
    for (key, _), fit in fits.items():
        families.setdefault(family_of(key), []).append(fit)
    for family, members in families.items():
        prior = pooled_prior(members, f"{family} on {machine}")
        if prior:
            model.priors[family] = prior
    whole = pooled_prior(fits.values(), machine)
    if whole:
        model.priors["*"] = whole
    return model


def observations(
    files: Iterable[ResultFile],
    is_own: Callable[[str], bool],
    code_id: Callable[[str], str] | None = None,
) -> list[Observation]:
    """Every session median with samples: controls grouped by environment, own series by code state."""
    out = []
    for f in files:
        for key, result in f.results.items():
            if not result.samples or result.started_at is None:
                continue
            if is_own(key):
                group = "code " + (code_id(f.commit) if code_id else f.commit)
            else:
                group = "env " + f.env
            started = result.started_at / 1000
            out.append(Observation(key, result.version, group, started, log_median(result.samples), str(f.path)))
    return out


def learn(
    files: list[ResultFile],
    machine: str,
    is_own: Callable[[str], bool],
    code_id: Callable[[str], str] | None = None,
    min_gap_s: float = MIN_SESSION_GAP_S,
) -> NoiseModel:
    """The machine's noise model from its history and A/A result files."""
    files = [f for f in files if f.machine == machine]
    if not files:
        raise ResultsError(f"no results of machine {machine} to learn its noise from")
    return fit_model(observations(files, is_own, code_id), machine, min_gap_s, files=len(files))


def shown_path(path: Path, root: Path) -> str:
    """The path as a report shows it: relative to the project root when inside it, so reports carry no
    machine-specific folders."""
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def noise_file(noise_root: Path, machine: str) -> Path:
    return noise_root / f"{machine}.json"


def runs_dir(noise_root: Path, machine: str) -> Path:
    return noise_root / machine / "runs"


def aa_result_files(noise_root: Path, machine: str) -> list[Path]:
    folder = runs_dir(noise_root, machine)
    return sorted(p for p in folder.glob(f"*/{machine}/*.json") if p.name not in NOT_RESULTS)


def save(model: NoiseModel, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(asdict(model), indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def load_model(path: Path) -> NoiseModel:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ResultsError(f"no noise model {path}: learn one with `tierbench compare --learn-noise`") from None
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != NOISE_FORMAT:
        got = data.get("format") if isinstance(data, dict) else None
        raise ResultsError(f"{path}: noise format {got!r} is not {NOISE_FORMAT}; learn it again (--learn-noise)")
    try:
        data["series"] = {k: SeriesFit(**v) for k, v in data["series"].items()}
        data["priors"] = {k: Prior(**v) for k, v in data["priors"].items()}
        return NoiseModel(**data)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ResultsError(f"{path} is not a noise model ({exc})") from None


def load_aa_runs(noise_root: Path, machine: str, commit: str | None = None) -> list[ResultFile]:
    files = [load(p) for p in aa_result_files(noise_root, machine)]
    return [f for f in files if commit is None or f.commit.startswith(commit)]
