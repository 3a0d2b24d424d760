"""Reading asv's stored results: results/asv/<machine>/<commit[:8]>-<env>.json (asv 0.6 format).

asv 0.6 keeps, per benchmark, one list whose entries are named by the file's `result_columns`
(result, params, version, started_at, duration, stats_ci_99_a, ..., samples, profile); a parameterized
benchmark holds a list per column, one entry per combination of the cartesian product of its params.
Trailing empty columns may be left off. A result of None is a failure, NaN a skip.
"""

from __future__ import annotations

import itertools
import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ResultsError(ValueError):
    """Results that are missing or unreadable; the message names what exists."""


@dataclass(frozen=True)
class BenchmarkResult:
    key: str  # asv's display name: name(param, ...) as in `asv compare`
    name: str
    params: tuple[str, ...]
    version: str | None
    value: float | None  # asv's median; None: failed; NaN: skipped
    samples: list[float] | None
    started_at: float | None = None  # when asv started this benchmark (ms since the epoch): the session's time

    @property
    def status(self) -> str:
        if self.value is None:
            return "failed"
        if isinstance(self.value, float) and math.isnan(self.value):
            return "skipped"
        return "ok"


@dataclass
class ResultFile:
    path: Path
    machine: str
    commit: str
    env: str
    date: int | None
    results: dict[str, BenchmarkResult] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.commit[:8]


def benchmark_key(name: str, params: tuple[str, ...]) -> str:
    return f"{name}({', '.join(params)})" if params else name


def load(path: str | Path) -> ResultFile:
    """One asv result file; raises ResultsError naming the file when it is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ResultsError(f"no such result file: {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or "commit_hash" not in data or "results" not in data:
        raise ResultsError(f"{path} is not an asv result file (no commit_hash/results)")
    if data.get("version") != 2 or "result_columns" not in data:
        raise ResultsError(
            f"{path}: asv result format version {data.get('version')!r} is not supported (asv 0.6 writes version 2)"
        )
    columns = data["result_columns"]
    if not isinstance(columns, list) or not isinstance(data["results"], dict):
        raise ResultsError(f"{path}: result_columns must be a list and results an object")
    params = data.get("params", {})
    date = data.get("date")
    if not isinstance(data["commit_hash"], str) or not isinstance(params, dict):
        raise ResultsError(f"{path}: commit_hash must be a string and params an object")
    if date is not None and (isinstance(date, bool) or not isinstance(date, (int, float))):
        raise ResultsError(f"{path}: date must be a number (ms since the epoch)")
    out = ResultFile(
        path=path,
        machine=str(params.get("machine", path.parent.name)),
        commit=data["commit_hash"],
        env=str(data.get("env_name", "")),
        date=date,
    )
    for name, row in data["results"].items():
        if not isinstance(row, list):
            raise ResultsError(f"{path}: the result of {name} is not a list of columns")
        cols = dict(itertools.zip_longest(columns, row))
        try:
            for result in _expand(name, cols):
                out.results[result.key] = result
        except (TypeError, ValueError) as exc:
            raise ResultsError(f"{path}: the result of {name} is malformed ({exc})") from None
    return out


def require_results(result: ResultFile) -> ResultFile:
    """The file, if it holds at least one benchmark result; else an error naming it (an empty file is never
    "no regression")."""
    if not result.results:
        raise ResultsError(f"{result.path}: holds no benchmark results")
    return result


def _expand(name: str, cols: dict[str, Any]) -> list[BenchmarkResult]:
    params = cols.get("params") or []
    combos = list(itertools.product(*params)) if params else [()]
    values = cols.get("result")
    samples = cols.get("samples")
    if not params:  # asv keeps one-entry lists here too; older writers kept bare values
        if not isinstance(values, list):
            values = [values]
        if samples is not None and not (
            isinstance(samples, list) and all(s is None or isinstance(s, list) for s in samples)
        ):
            samples = [samples]
    values = values or [None] * len(combos)
    samples = samples or [None] * len(combos)
    if not isinstance(values, list) or not isinstance(samples, list):
        raise ValueError("result and samples must be lists")
    started = cols.get("started_at")
    started = float(started) if isinstance(started, (int, float)) else None
    out = []
    for combo, value, sample in zip(combos, values, samples):
        combo = tuple(str(p) for p in combo)
        value = None if value is None else float(value)
        out.append(
            BenchmarkResult(
                benchmark_key(name, combo),
                name,
                combo,
                cols.get("version"),
                value,
                [float(s) for s in sample] if sample else None,
                started,
            )
        )
    return out


def machines(results_dir: Path) -> list[str]:
    if not results_dir.is_dir():
        return []
    return sorted(p.name for p in results_dir.iterdir() if (p / "machine.json").exists())


def pick_machine(results_dir: Path, machine: str | None) -> str:
    """The machine asked for, or the only one with results; else an error naming those that exist."""
    known = machines(results_dir)
    if machine:
        if machine not in known:
            raise ResultsError(
                f"no results for machine {machine!r} in {results_dir}; "
                f"machines with results: {', '.join(known) or 'none'}"
            )
        return machine
    if len(known) == 1:
        return known[0]
    if not known:
        raise ResultsError(f"no asv results in {results_dir}: run `tierbench nightly` first")
    raise ResultsError(f"results of several machines in {results_dir}: choose one with --machine ({', '.join(known)})")


# Files in a machine's results folder that are not results (asv skips the same names).
NOT_RESULTS = ("machine.json", "benchmarks.json")


def result_files(results_dir: Path, machine: str) -> list[Path]:
    folder = results_dir / machine
    return sorted(p for p in folder.glob("*.json") if p.name not in NOT_RESULTS)


def _header(path: Path) -> tuple[str, str] | None:
    """(commit, env) of a result file from its name (<commit8>-<env>.json), read from the file if odd;
    None (with a warning naming it) for a file that is not a result."""
    stem = path.stem
    if len(stem) > 9 and stem[8] == "-":
        return stem[:8], stem[9:]
    try:
        data = load(path)
    except ResultsError as exc:
        warnings.warn(f"left out: {exc}", stacklevel=3)
        return None
    return data.commit[:8], data.env


def _headers(results_dir: Path, machine: str) -> list[tuple[Path, str, str]]:
    return [(p, *h) for p in result_files(results_dir, machine) if (h := _header(p)) is not None]


def commits_with_results(results_dir: Path, machine: str) -> list[str]:
    return sorted({commit for _, commit, _ in _headers(results_dir, machine)})


def _full_commit(path: Path) -> str:
    try:
        return load(path).commit
    except ResultsError as exc:
        warnings.warn(f"left out: {exc}", stacklevel=3)
        return ""


def find(results_dir: Path, machine: str, commit: str, env: str | None = None) -> ResultFile:
    """The result file of a commit (full hash or a prefix of at least 4) on a machine."""
    prefix = commit.lower()
    headers = {p: (c, e) for p, c, e in _headers(results_dir, machine)}
    matches = [p for p, (c, e) in headers.items() if c.startswith(prefix[:8]) and (env is None or e == env)]
    if len(prefix) > 8:
        matches = [p for p in matches if _full_commit(p).startswith(prefix)]
    if not matches:
        known = commits_with_results(results_dir, machine)
        raise ResultsError(
            f"no results for commit {commit} on machine {machine}"
            + (f" in environment {env}" if env else "")
            + f"; commits with results: {', '.join(known[-20:]) or 'none'}"
        )
    if len(matches) > 1:
        envs = sorted({headers[p][1] for p in matches})
        commits = sorted({headers[p][0] for p in matches})
        if len(commits) > 1:
            raise ResultsError(f"commit prefix {commit} is ambiguous: {', '.join(commits)}")
        raise ResultsError(
            f"commit {commit} has results in several environments; choose one with --env ({', '.join(envs)})"
        )
    return load(matches[0])
