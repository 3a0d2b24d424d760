"""The noise model: per benchmark and per machine, how far medians move between A/A runs.

A/A runs are the same commit measured in separate sessions. Their raw asv result files are kept in
results/noise/<machine>/runs/<commit8>-<n>/<machine>/ (outside results/asv, where asv would take every
JSON for a result), and the model learned from them in results/noise/<machine>.json.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .asvresults import ResultFile, ResultsError, load
from .stats import relative_spread

NOISE_FORMAT = 1


@dataclass
class NoiseModel:
    machine: str
    noise: dict[str, float] = field(default_factory=dict)  # benchmark key -> relative spread of medians
    runs: dict[str, int] = field(default_factory=dict)  # benchmark key -> A/A runs behind it
    commits: list[str] = field(default_factory=list)
    created: float = field(default_factory=time.time)
    format: int = NOISE_FORMAT

    def lookup(self, key: str) -> tuple[float, str]:
        """(noise, where it comes from). A benchmark without A/A data gets the machine's largest noise."""
        if key in self.noise:
            return self.noise[key], f"A/A, {self.runs.get(key, 0)} runs"
        if self.noise:
            return max(self.noise.values()), "no A/A data for it: machine's largest"
        return 0.0, "no A/A data"


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
    return sorted(p for p in folder.glob(f"*/{machine}/*.json") if p.name != "machine.json")


def _median(result) -> float | None:
    if result.samples:
        return statistics.median(result.samples)
    if result.status == "ok":
        return result.value
    return None


def learn(files: list[ResultFile], machine: str) -> NoiseModel:
    """Noise per benchmark: over each commit's A/A runs, largest/smallest median - 1; the worst commit wins.

    Only runs of one benchmark version are compared (a new version is a different measurement).
    """
    by_commit: dict[str, list[ResultFile]] = {}
    for f in files:
        by_commit.setdefault(f.commit, []).append(f)
    model = NoiseModel(machine=machine, commits=sorted(c for c, fs in by_commit.items() if len(fs) >= 2))
    if not model.commits:
        counts = ", ".join(f"{c[:8]}: {len(fs)}" for c, fs in sorted(by_commit.items())) or "none"
        raise ResultsError(f"A/A noise needs at least 2 runs of one commit on {machine}; runs found: {counts}")
    for commit in model.commits:
        medians: dict[tuple[str, str | None], list[float]] = {}
        for f in by_commit[commit]:
            for key, result in f.results.items():
                value = _median(result)
                if value is not None and value > 0:
                    medians.setdefault((key, result.version), []).append(value)
        for (key, _), values in medians.items():
            if len(values) < 2:
                continue
            spread = relative_spread(values)
            if spread >= model.noise.get(key, -1.0):
                model.noise[key] = spread
                model.runs[key] = len(values)
    return model


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
        raise ResultsError(f"no noise model {path}: learn one with `tierbench compare --learn-noise COMMIT`") from None
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path} is not JSON: {exc}") from None
    if data.get("format") != NOISE_FORMAT:
        raise ResultsError(f"{path}: noise format {data.get('format')!r} is not {NOISE_FORMAT}; learn it again")
    return NoiseModel(**data)


def load_aa_runs(noise_root: Path, machine: str, commit: str | None = None) -> list[ResultFile]:
    files = [load(p) for p in aa_result_files(noise_root, machine)]
    return [f for f in files if commit is None or f.commit.startswith(commit)]
