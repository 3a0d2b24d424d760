"""`tierbench compare` of what `tierbench run` recorded: two runs, or two providers of one run.

- **Two runs** (`compare RUN_A RUN_B`, each a run id under --runs or a run folder): every (case, provider)
  recorded in either, judged as two commits' stored results are. The runs ran in two sessions, so the
  estimate (the ratio of the two run medians) is judged against the noise of one run across sessions: the
  prior of a saved noise model (`--noise FILE`; its provider's within the family where it has one, else the
  family's), else the prior of a machine without history (sd 3%).
  Across sessions nothing is confirmed: an own-code series that looks slower is `suspected`, a control that
  moved is `drift`; a paired A/B in one session (`compare --providers` or `--plugin-versions`) confirms.
- **Two providers of one run** (`compare RUN --providers A B`): in a run the providers of a case took turns
  round by round under one timer (tierbench.timing.interleaved), so each round is a pair measured back to
  back. The samples of each provider are cut into the run's rounds (timing.rounds of its config.yaml) and
  judged by the A/B rule (stats.round_medians): `confirmed` slower when B's interval lies above A's.

Torch-free: it reads records and stored configs only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from ..store.reading import find_run, read_records
from ..store.records import CONFIG_FILE, Measurement
from ..text import plain
from .asvresults import BenchmarkResult, ResultsError
from .compare import Report, Row, compare_row, sort_rows
from .keys import asv_name
from .measured_ab import fresh_state
from .noise import NoiseModel, Prior, default_prior
from .stats import Noise, Settings, median, round_medians


def case_name(record: Measurement) -> str:
    """A case as a report row names it: op, shape label, dtype and pass (backticks would end the row's code)."""
    text = " ".join(str(p) for p in (record.op, record.label, record.case.get("dtype", ""), record.mode) if p)
    return plain(text).replace("`", "'")


def series_name(record: Measurement) -> str:
    return f"{case_name(record)} · {plain(record.provider).replace('`', chr(39))}"


@dataclass(frozen=True)
class Run:
    """One run as given on the command line: its folder, its records (today's verdicts) and its label."""

    given: str
    folder: Path
    records: list[Measurement]

    @property
    def label(self) -> str:
        return plain(self.folder.name)

    @property
    def device(self) -> str:
        names = {str(r.env.get("device_name") or r.env.get("device_type") or "") for r in self.records}
        return plain(", ".join(sorted(n for n in names if n)) or "unknown device")


def is_run(given: str, runs_dir: str | Path) -> bool:
    return find_run(given, runs_dir) is not None


def load_run(given: str, runs_dir: str | Path) -> Run:
    """The run a command-line argument names; ResultsError (exit 2) naming the runs that exist otherwise."""
    folder = find_run(given, runs_dir)
    if folder is None:
        raise ResultsError(f"{plain(given)} is not a run folder nor a run id under {runs_dir}; {known_runs(runs_dir)}")
    records = read_records(folder)
    if not records:
        raise ResultsError(f"run {plain(given)} ({folder}) holds no records")
    return Run(given, folder, records)


def known_runs(runs_dir: str | Path, shown: int = 8) -> str:
    root = Path(runs_dir)
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []
    if not names:
        return f"no runs in {runs_dir}"
    more = f" (and {len(names) - shown} older)" if len(names) > shown else ""
    return f"runs in {runs_dir}: {', '.join(plain(n) for n in names[-shown:])}{more}"


def as_result(key: str, record: Measurement) -> BenchmarkResult:
    """A record in the shape of an asv result (seconds), so the commits' verdict code judges it unchanged: a
    skipped record is asv's skip (NaN), an incorrect or failed one asv's failure (None). The version is what
    makes two records comparable at all: the device and the timer."""
    version = f"{record.env.get('device_name') or record.env.get('device_type')}|{record.timer}"
    if record.status == "ok" and record.samples_ms:
        samples = [ms * 1e-3 for ms in record.samples_ms]
        return BenchmarkResult(key, key, (), version, median(samples), samples, record.time * 1e3)
    value = math.nan if record.status == "skipped" else None
    return BenchmarkResult(key, key, (), version, value, None, record.time * 1e3)


class RunNoise:
    """The noise of one run across sessions for records (which have no history of their own): the prior of a
    saved noise model where it has one (its provider's within the family, else the family's), else the prior
    of a machine without history."""

    def __init__(self, model: NoiseModel | None, source: str):
        self.model = model
        self.source = source
        self._series: dict[str, tuple[str, str]] = {}  # row key -> (op family, provider as asv names it)

    def note(self, key: str, family: str, provider: str) -> None:
        """Which family and provider a row's records are of: what its prior is looked up by."""
        self._series[key] = (family, asv_name(provider))

    def prior(self, key: str) -> Prior:
        if self.model is None:
            return default_prior()
        family, provider = self._series.get(key, ("", None))
        return self.model.prior_for(family, provider)

    def lookup(self, key: str, version: str | None = None) -> Noise:
        prior = self.prior(key)
        return Noise(prior.sigma, 4.0, f"records have no history across sessions: prior {prior.source}")


def _why_not(record: Measurement | None, side: str) -> str:
    if record is None or record.status == "ok":
        return ""
    return f"{record.status} at the {side}: {plain(record.reason)}"


def compare_runs(
    base: Run, head: Run, settings: Settings, own: Callable[[Measurement], bool], noise: RunNoise
) -> Report:
    """Every (case, provider) of either run, across sessions: own code nominated, controls judged for drift."""
    report = Report(
        base.label,
        head.label,
        head.device,
        settings,
        "across sessions",
        noise.source,
        own_providers=(),
        base_commit=str(base.folder),
        head_commit=str(head.folder),
    )
    report.what = f"two runs: {base.label} ({base.folder}) → {head.label} ({head.folder})"
    before = {r.key: r for r in base.records}
    after = {r.key: r for r in head.records}
    for pair in sorted(set(before) | set(after)):
        b, h = before.get(pair), after.get(pair)
        either = h or b
        key = series_name(either)
        noise.note(key, either.family, either.provider)
        mine = own(either)
        row = compare_row(
            key,
            b and as_result(key, b),
            h and as_result(key, h),
            noise,
            settings,
            mine,  # type: ignore[arg-type]
        )
        if row.state == "incomparable":
            row.note = f"measured on another device or by another timer ({_device_timer(b)} vs {_device_timer(h)})"
        elif row.state in ("failed", "skipped"):
            row.note = "; ".join(n for n in (_why_not(b, "base"), _why_not(h, "head")) if n) or row.note
        report.rows.append(row)
    sort_rows(report.rows)
    if base.device != head.device:
        report.confirmation = f"the runs were measured on {base.device} and {head.device}: not comparable"
    else:
        report.confirmation = (
            "two runs are two sessions, so nothing is confirmed here: a paired A/B in one session does that "
            "(--providers A B, --plugin-versions OLD NEW)"
        )
    return report


def _device_timer(record: Measurement | None) -> str:
    if record is None:
        return "none"
    return plain(f"{record.env.get('device_name') or record.env.get('device_type')}, {record.timer}")


def own_code(record: Measurement) -> bool:
    """Own code (the project's or a plugin's own tier) is judged; everything else is a control. A record
    older than the field counts as own: unknown code is never taken for a control."""
    return record.own_code is not False


# -- two providers of one run ---------------------------------------------------------------------------


def run_rounds(run: Run) -> int:
    """The number of timed rounds the run's providers took turns in (its config.yaml's timing.rounds)."""
    path = run.folder / CONFIG_FILE
    try:
        rounds = OmegaConf.load(path).timing.rounds
    except Exception as exc:  # noqa: BLE001 - a missing or damaged config says only that it cannot be read
        raise ResultsError(f"run {run.label}: cannot read timing.rounds from {path} ({type(exc).__name__})") from None
    if not isinstance(rounds, int) or rounds < 1:
        raise ResultsError(f"run {run.label}: timing.rounds={rounds!r} in {path} is not a count of rounds")
    return rounds


def split_rounds(samples_ms: list[float], rounds: int) -> list[float] | None:
    """Per-round medians (seconds) of a provider's time-ordered samples: each round took the same number of
    repetitions (timing.interleaved); None when the samples do not split so."""
    if rounds < 1 or not samples_ms or len(samples_ms) % rounds:
        return None
    reps = len(samples_ms) // rounds
    return [median(samples_ms[i * reps : (i + 1) * reps]) * 1e-3 for i in range(rounds)]


def check_providers(run: Run, names: list[str]) -> None:
    recorded = sorted({r.provider for r in run.records})
    unknown = [n for n in names if n not in recorded]
    if unknown:
        raise ResultsError(
            f"--providers {' '.join(plain(n) for n in unknown)}: no record in run {run.label}; its providers: "
            f"{', '.join(plain(p) for p in recorded)}"
        )
    if names[0] == names[1]:
        raise ResultsError(f"--providers names {plain(names[0])} twice: give two providers of run {run.label}")


def compare_providers(run: Run, base: str, head: str, settings: Settings) -> Report:
    """Per case of the run, provider `head` against provider `base`, paired round by round."""
    check_providers(run, [base, head])
    rounds = run_rounds(run)
    by_case: dict[str, dict[str, Measurement]] = {}
    for r in run.records:
        if r.provider in (base, head):
            by_case.setdefault(r.case_id, {})[r.provider] = r
    report = Report(
        plain(base),
        plain(head),
        run.device,
        settings,
        "paired A/B",
        f"the run's own rounds ({rounds} rounds, the providers of a case taking turns under one timer)",
        own_providers=(),
        base_commit=f"{plain(base)} in {run.folder}",
        head_commit=f"{plain(head)} in {run.folder}",
    )
    report.what = f"two providers of run {run.label} ({run.folder}): {plain(base)} → {plain(head)}"
    for records in by_case.values():
        b, h = records.get(base), records.get(head)
        key = case_name(b or h)
        report.rows.append(_provider_row(key, b, h, rounds, settings))
    sort_rows(report.rows)
    return report


def _provider_row(key: str, b: Measurement | None, h: Measurement | None, rounds: int, settings: Settings) -> Row:
    if b is None:
        return Row(key, "new", note="only the head provider ran this case")
    if h is None:
        return Row(key, "gone", note="only the base provider ran this case")
    for side, record in (("base", b), ("head", h)):
        if record.status != "ok":
            state = "skipped" if record.status == "skipped" else "failed"
            return Row(key, state, note=_why_not(record, side))
    before, after = split_rounds(b.samples_ms, rounds), split_rounds(h.samples_ms, rounds)
    if before is None or after is None:
        why = f"the samples do not split into the run's {rounds} rounds"
        return Row(key, "unjudged", note=why)
    v = round_medians(before, after, settings)
    return Row(key, fresh_state(v), ab=v, note=v.reason)
