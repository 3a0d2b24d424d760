"""The noise model: per series and machine, how far one run's median moves between sessions of unchanged code,
and which control, measured beside an own series in the same run, takes the machine's share out of it.

Learned from the history itself and from A/A runs:
- a **session** is a sitting of the machine: result files whose runs started less than `min_gap_s` after the
  previous one chain into one (a nightly of several commits, back-to-back A/A runs). Runs of one session share
  the machine's state; runs of different sessions do not, which is what a nightly's comparison faces;
- a **control** series (a provider this project does not build) runs the same code in every session of one
  benchmark version and environment, so all its runs count;
- a series of the project's **own** code counts the runs of one code state: commits at which the code its
  provider executes is the same (`code_id`: suite/benchmarks/identity.py), so a commit to the decode kernel
  leaves the norm series' history whole.

Per series the spread has two parts, estimated within code groups: `within` (runs of one session around their
session's mean: what an A/B's rounds see) and `between` (session means around their group's mean). One run
against another run of another session differs by sqrt(2) times sigma, sigma^2 = between + within * (1 -
mean 1/runs per session) (a session mean already carries within / runs). Each part is shrunk toward a
**prior**, the pooled part of its family on the machine (every series of matmul, norm or attention), worth
`prior_df` degrees of freedom: a series with little history is held to its family's spread; with no history
on the machine at all, DEFAULT_PRIOR_SIGMA, stated in every verdict that uses it. Where a provider has
several series of a family with enough history (MIN_PROVIDER_SERIES, MIN_PROVIDER_PRIOR_DF), its series are
shrunk toward that provider's pooled part instead: providers differ in how much they move between sessions
(on an H100, XLA's norm series 33-46%, the others' 0.1-1%), and one volatile provider pooled into the family
would hold every other series of it to its spread.

**Normalisers.** Providers of one history class are measured in one process, case by case and turn by turn,
so a clock or thermal state hits them alike. Per class, the control provider whose ratio to the class's own
series varies least between runs of one session is that class's normaliser where it cuts the own series'
within-session variance to at most NORMALISE_GAIN of what it was, over at least MIN_NORMALISE_DF degrees of
freedom: the A/B then judges own / control per round. Where nothing is shown to help, nothing is divided.

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

from . import keys
from .asvresults import NOT_RESULTS, ResultFile, ResultsError, load
from .keys import family_of
from .stats import Noise, log_median

NOISE_FORMAT = 4  # 4: priors per provider within a family
MIN_SESSION_GAP_S = 1800.0  # runs closer than this to the previous one share a session
PRIOR_DF = 4.0  # weight of the family prior, in degrees of freedom
# The prior where a machine has no history at all: on an H200 the between-session sd of a series of
# unchanged code ranged from 0.1% to 3.7%; a new machine is held to the top of that range.
DEFAULT_PRIOR_SIGMA = 0.03
# A provider's own prior within a family needs this many series and between-session degrees of freedom.
MIN_PROVIDER_SERIES = 2
MIN_PROVIDER_PRIOR_DF = 4
NORMALISE_GAIN = 0.5  # a normaliser must at least halve the own series' within-session variance
MIN_NORMALISE_DF = 4  # over at least this many degrees of freedom


@dataclass(frozen=True)
class Observation:
    """One run's median of one series."""

    key: str
    version: str | None
    group: str  # runs of one group ran the same code
    session: int  # the machine's sitting it was measured in
    started_s: float  # when the run measured it
    log_median: float
    source: str = ""  # the result file: the run
    own: bool = False


@dataclass
class SeriesFit:
    version: str | None
    within_ss: float = 0.0  # runs around their session mean, within code groups
    within_df: int = 0
    between_ss: float = 0.0  # session means around their code group's mean
    between_df: int = 0
    inv_runs: float = 1.0  # mean of 1/runs over the sessions behind between_ss
    sessions: int = 0
    runs: int = 0


@dataclass
class Prior:
    sigma: float  # sd of one run across sessions (its family's, pooled)
    df: float  # degrees of freedom of the pooled between-session estimate (not its weight: that is PRIOR_DF)
    series: int  # series pooled
    source: str
    within: float = 0.0  # sd of one run within a session (pooled)
    between: float = 0.0  # sd of session means (pooled)


@dataclass
class Normaliser:
    """The control provider an own series of a class is divided by, run by run, and the evidence for it."""

    control: str  # asv provider name (a series of the same class and case)
    raw_sd: float  # within-session sd of the own series' runs
    sd: float  # ... of own / control
    df: int
    series: int

    @property
    def source(self) -> str:
        return (
            f"divided by {self.control} of the same case and run: within-session sd {self.raw_sd:.2%} -> "
            f"{self.sd:.2%} over {self.series} series (df {self.df})"
        )


@dataclass
class NoiseModel:
    machine: str
    series: dict[str, SeriesFit] = field(default_factory=dict)
    # per family ("norm"), per provider within a family ("norm:triton"), and "*" for the whole machine
    priors: dict[str, Prior] = field(default_factory=dict)
    normalisers: dict[str, Normaliser] = field(default_factory=dict)  # per history class (module.Class)
    min_gap_s: float = MIN_SESSION_GAP_S
    prior_df: float = PRIOR_DF
    files: int = 0
    sessions: int = 0
    created: float = field(default_factory=time.time)
    format: int = NOISE_FORMAT

    def prior_for(self, family: str, provider: str | None = None) -> Prior:
        """The prior of a provider's series in a family: the provider's own where the model has one, else the
        family's, else the machine's, else that of a machine without history."""
        own = self.priors.get(provider_prior_name(family, provider)) if provider else None
        return own or self.priors.get(family) or self.priors.get("*") or default_prior()

    def prior(self, key: str) -> Prior:
        parts = keys.parse(key)
        return self.prior_for(family_of(key), parts.provider if parts else None)

    def lookup(self, key: str, version: str | None = None) -> Noise:
        """The noise of one run across sessions: the series' own history shrunk toward its prior (its provider's
        within the family, else the family's)."""
        prior = self.prior(key)
        fit = self.series.get(key)
        why = ""
        if fit is None:
            why = "no history of this series"
        elif version is not None and fit.version != version:
            why = "no history of this version"
        elif fit.between_df == 0:
            why = "no history across sessions"
        if why:
            return Noise(prior.sigma, self.prior_df, f"{why}: prior {prior.source}")
        between = (self.prior_df * prior.between**2 + fit.between_ss) / (self.prior_df + fit.between_df)
        within = (self.prior_df * prior.within**2 + fit.within_ss) / (self.prior_df + fit.within_df)
        sigma = math.sqrt(between + within * (1.0 - fit.inv_runs))
        own = math.sqrt(fit.between_ss / fit.between_df)
        return Noise(
            sigma,
            self.prior_df + fit.between_df,
            f"noise of this series on {self.machine}: sd {own:.2%} of session means over {fit.sessions} sessions "
            f"(df {fit.between_df}), shrunk toward prior {prior.source}",
        )

    def normaliser(self, key: str) -> Normaliser | None:
        return self.normalisers.get(keys.class_of(key))


def provider_prior_name(family: str, provider: str) -> str:
    """The name of a provider's prior within a family in `NoiseModel.priors` ("norm:triton")."""
    return f"{family}:{provider}"


def default_prior() -> Prior:
    s = DEFAULT_PRIOR_SIGMA
    return Prior(s, 0.0, 0, f"sd {s:.1%} (no history on this machine)", within=s / math.sqrt(2), between=s)


# -- sessions ------------------------------------------------------------------------------------------------


def file_start(f: ResultFile) -> float | None:
    """When a run began (s since the epoch): its earliest benchmark's start."""
    starts = [r.started_at for r in f.results.values() if r.started_at is not None]
    return min(starts) / 1000 if starts else None


def sessions(files: Iterable[ResultFile], min_gap_s: float = MIN_SESSION_GAP_S) -> dict[str, int]:
    """Result file path -> the machine's session it belongs to (0, 1, ... in time order): runs chained by
    starts less than `min_gap_s` apart."""
    starts = sorted((t, str(f.path)) for f in files if (t := file_start(f)) is not None)
    out: dict[str, int] = {}
    index, last = -1, -math.inf
    for t, path in starts:
        if t - last >= min_gap_s:
            index += 1
        out[path] = index
        last = t
    return out


# -- fitting -------------------------------------------------------------------------------------------------


def _ss(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values)


def fit_series(observations: Iterable[Observation]) -> SeriesFit:
    """Within- and between-session spread of one series' runs (one version), within code groups."""
    by_group: dict[str, dict[int, list[float]]] = {}
    version = None
    fit = SeriesFit(None)
    for o in observations:
        by_group.setdefault(o.group, {}).setdefault(o.session, []).append(o.log_median)
        version = o.version
        fit.runs += 1
    fit.version = version
    inv = []
    for by_session in by_group.values():
        means = []
        for values in by_session.values():
            fit.within_ss += _ss(values)
            fit.within_df += len(values) - 1
            means.append(sum(values) / len(values))
        fit.sessions += len(means)
        if len(means) > 1:
            fit.between_ss += _ss(means)
            fit.between_df += len(means) - 1
            inv += [1.0 / len(v) for v in by_session.values()]
    fit.inv_runs = sum(inv) / len(inv) if inv else 1.0
    return fit


def pooled_prior(fits: Iterable[SeriesFit], what: str) -> Prior | None:
    fits = list(fits)
    between = [f for f in fits if f.between_df > 0]
    df = sum(f.between_df for f in between)
    if not df:
        return None
    var_b = sum(f.between_ss for f in between) / df
    inv = sum(f.inv_runs * f.between_df for f in between) / df
    within_df = sum(f.within_df for f in fits)
    var_w = sum(f.within_ss for f in fits) / within_df if within_df else 0.0
    sigma = math.sqrt(var_b + var_w * (1.0 - inv))
    source = f"sd {sigma:.2%} of one run across sessions, pooled over {len(between)} series of {what} (df {df})"
    return Prior(sigma, df, len(between), source, within=math.sqrt(var_w), between=math.sqrt(var_b))


def group_series(observations: Iterable[Observation]) -> dict[tuple[str, str | None], list[Observation]]:
    by_series: dict[tuple[str, str | None], list[Observation]] = {}
    for o in observations:
        by_series.setdefault((o.key, o.version), []).append(o)
    return by_series


def newest_versions(by_series: dict[tuple[str, str | None], list[Observation]]) -> dict[str, str | None]:
    """Per series, the version of its latest run."""
    newest: dict[str, tuple[float, str | None]] = {}
    for (key, version), obs in by_series.items():
        latest = max(o.started_s for o in obs)
        if latest >= newest.get(key, (-math.inf, None))[0]:
            newest[key] = (latest, version)
    return {key: version for key, (_, version) in newest.items()}


def learn_normalisers(observations: Iterable[Observation]) -> dict[str, Normaliser]:
    """Per history class, the control whose ratio to the class's own series is steadiest within sessions,
    where it halves (NORMALISE_GAIN) the own series' within-session variance over MIN_NORMALISE_DF or more."""
    by_run: dict[str, dict[str, Observation]] = {}
    for o in observations:
        by_run.setdefault(o.source, {})[o.key] = o
    # (class, control provider) -> {(own key, group, session): [(raw, normalised)]}
    pairs: dict[tuple[str, str], dict[tuple[str, str, int], list[tuple[float, float]]]] = {}
    for run in by_run.values():
        for key, o in run.items():
            parts = keys.parse(key)
            if not o.own or parts is None:
                continue
            for other, c in run.items():
                cparts = keys.parse(other)
                if c.own or cparts is None or cparts.cls != parts.cls or cparts.params != parts.params:
                    continue
                if c.version != o.version:
                    continue
                cell = pairs.setdefault((parts.cls, cparts.provider), {}).setdefault((key, o.group, o.session), [])
                cell.append((o.log_median, o.log_median - c.log_median))
    best: dict[str, Normaliser] = {}
    for (cls, control), groups in sorted(pairs.items()):
        raw = norm = 0.0
        df, series = 0, set()
        for (key, _, _), values in groups.items():
            if len(values) < 2:
                continue
            raw += _ss([r for r, _ in values])
            norm += _ss([n for _, n in values])
            df += len(values) - 1
            series.add(key)
        if df < MIN_NORMALISE_DF or raw <= 0 or norm > NORMALISE_GAIN * raw:
            continue
        candidate = Normaliser(control, math.sqrt(raw / df), math.sqrt(norm / df), df, len(series))
        if cls not in best or candidate.sd < best[cls].sd:
            best[cls] = candidate
    return best


def fit_model(observations: Iterable[Observation], machine: str, files: int = 0) -> NoiseModel:
    """The model from observations: per series its newest version's fit, per family the pooled prior, per
    class its normaliser."""
    observations = list(observations)
    by_series = group_series(observations)
    fits = {key_version: fit_series(obs) for key_version, obs in by_series.items()}
    model = NoiseModel(machine=machine, files=files, sessions=len({o.session for o in observations}))
    for key, version in newest_versions(by_series).items():
        model.series[key] = fits[(key, version)]
    families: dict[str, list[SeriesFit]] = {}
    providers: dict[tuple[str, str], list[SeriesFit]] = {}
    for (key, _), fit in fits.items():
        families.setdefault(family_of(key), []).append(fit)
        if parts := keys.parse(key):
            providers.setdefault((parts.family, parts.provider), []).append(fit)
    for family, members in families.items():
        prior = pooled_prior(members, f"{family} on {machine}")
        if prior:
            model.priors[family] = prior
    for (family, provider), members in providers.items():
        prior = pooled_prior(members, f"{family}'s {provider} on {machine}")
        if prior and prior.series >= MIN_PROVIDER_SERIES and prior.df >= MIN_PROVIDER_PRIOR_DF:
            model.priors[provider_prior_name(family, provider)] = prior
    whole = pooled_prior(fits.values(), machine)
    if whole:
        model.priors["*"] = whole
    model.normalisers = learn_normalisers(observations)
    return model


CodeId = Callable[[str, str], str]  # (asv key, commit) -> the code identity of that series at that commit


def observations(
    files: Iterable[ResultFile],
    is_own: Callable[[str], bool],
    code_id: CodeId | None = None,
    session_of: dict[str, int] | None = None,
    min_gap_s: float = MIN_SESSION_GAP_S,
) -> list[Observation]:
    """Every run's median with samples: controls grouped by environment, own series by code identity."""
    files = list(files)
    session_of = session_of if session_of is not None else sessions(files, min_gap_s)
    out = []
    for f in files:
        for key, result in f.results.items():
            if not result.samples or result.started_at is None or str(f.path) not in session_of:
                continue
            own = is_own(key)
            group = "code " + (code_id(key, f.commit) if code_id else f.commit) if own else "env " + f.env
            out.append(
                Observation(
                    key,
                    result.version,
                    group,
                    session_of[str(f.path)],
                    result.started_at / 1000,
                    log_median(result.samples),
                    str(f.path),
                    own,
                )
            )
    return out


def learn(
    files: list[ResultFile],
    machine: str,
    is_own: Callable[[str], bool],
    code_id: CodeId | None = None,
    min_gap_s: float = MIN_SESSION_GAP_S,
) -> NoiseModel:
    """The machine's noise model from its history and A/A result files."""
    files = [f for f in files if f.machine == machine]
    if not files:
        raise ResultsError(f"no results of machine {machine} to learn its noise from")
    model = fit_model(observations(files, is_own, code_id, min_gap_s=min_gap_s), machine, files=len(files))
    model.min_gap_s = min_gap_s
    return model


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
    """Write the model, unless the file holds the same model (learned again from the same history: only its
    `created` stamp would change)."""
    data = asdict(model)
    try:
        old = json.loads(path.read_text())
        if isinstance(old, dict) and {**old, "created": None} == json.loads(json.dumps({**data, "created": None})):
            return path
    except (OSError, json.JSONDecodeError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
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
        data["normalisers"] = {k: Normaliser(**v) for k, v in data.get("normalisers", {}).items()}
        return NoiseModel(**data)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ResultsError(f"{path} is not a noise model ({exc})") from None


def load_aa_runs(noise_root: Path, machine: str, commit: str | None = None) -> list[ResultFile]:
    files = [load(p) for p in aa_result_files(noise_root, machine)]
    return [f for f in files if commit is None or f.commit.startswith(commit)]
