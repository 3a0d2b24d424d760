"""Reading what runs left behind, in one place: which folders a name means, their records, and what a view
asks of records (was it timed, the fastest per tier, the baseline a speedup is quoted against).

Every view (`summary`, `spread`, `export`, the terminal table, the site) and every command that names a run
(`run resume=`, `profile`) reads through here, so a run id, a run folder and a sweep id mean the same thing
everywhere:

- a name with a path separator is a folder, by its path;
- any other name is an id under the results folder (`RUNS_ROOT` unless given): a run folder there, else a
  sweep's (in `<results>/.sweeps/<id>/`; `find_runs` gives its shards' runs, every launch, as one run).

JSON-lines files (measurements.jsonl, launches.jsonl) are read by `read_jsonl`: a damaged line is dropped
with a warning naming the file and line, never silently. Torch-free: the site and the tables never load
torch, an op or a tier.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import runmeta
from .records import CONFIG_FILE, LAUNCHES_FILE, RECORDS_FILE, Measurement
from .verdicts import rejudge

# Where `tierbench run` makes run folders, and where every command looks up a run id, unless told otherwise.
RUNS_ROOT = "results/runs"
# The provider speedups are quoted against where an op names none (an op's `baseline` defaults to it).
DEFAULT_BASELINE = ("eager",)

# A sweep's own folder inside the results folder (suite/scale/sweep.py writes it; a run id never starts with a dot).
SWEEPS_DIR = ".sweeps"
SWEEP_FILE = "sweep.json"
_SWEEP_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$")


# -- records --------------------------------------------------------------------------------------------


def timed(r: Measurement | None) -> bool:
    """Checked correct and timed here: the records a view ranks, charts and quotes speedups of."""
    return r is not None and r.status == "ok" and bool(r.median_ms)


def fastest(records: Iterable[Measurement]) -> Measurement | None:
    """The timed record with the lowest median (the first of a tie), or None where none was timed."""
    best = None
    for r in records:
        if timed(r) and (best is None or r.median_ms < best.median_ms):
            best = r
    return best


def fastest_per_tier(records: Iterable[Measurement]) -> dict[str, Measurement]:
    """Per tier, its fastest timed record (tiers in the order the records first time one)."""
    best: dict[str, Measurement] = {}
    for r in records:
        if timed(r) and (r.tier not in best or r.median_ms < best[r.tier].median_ms):
            best[r.tier] = r
    return best


def preferred_baselines(named: Sequence[str] | None, records: Iterable[Measurement]) -> tuple[str, ...]:
    """The providers a case's speedups are quoted against, preferred first: those its op names (run.json's
    `baselines`), else DEFAULT_BASELINE and then the vendor tier's providers of these records by name."""
    if named is not None:
        return tuple(named)
    return (*DEFAULT_BASELINE, *sorted({r.provider for r in records if r.tier == "vendor"}))


def baseline(
    records: Sequence[Measurement], named: Sequence[str] | None = None, counts: Any = timed
) -> Measurement | None:
    """The record of one case that its others are set against: the first preferred provider
    (`preferred_baselines`) whose record `counts` (timed, for a speedup; with a launch count, for what fusion
    saved)."""
    found = {r.provider: r for r in records if counts(r)}
    return next((found[name] for name in preferred_baselines(named, found.values()) if name in found), None)


def read_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each complete line of a JSON-lines file; a damaged line (a write cut short by
    a kill) is dropped with a warning naming the file and line. Nothing for a file that does not exist."""
    path = Path(path)
    if not path.exists():
        return
    lines = path.read_bytes().split(b"\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            where = "truncated last line" if number == len(lines) else f"damaged line {number}"
            warnings.warn(f"{path}: dropped a {where} (an interrupted write: {exc})", stacklevel=2)


def read_records(path: str | Path) -> list[Measurement]:
    """All complete records of a run folder (or file), one per (case_id, provider).

    Damaged lines are dropped with a warning naming the file and line; where a key appears twice (a run
    folder written by two processes before runs were locked), the last record wins, with a warning. Each
    verdict is the one today's bounds give (suite/store/verdicts.py): where it differs from the stored one, the
    record says so in `verdict_note`.
    """
    path = Path(path)
    if path.is_dir():
        path = path / RECORDS_FILE
    out: dict[tuple[str, str], Measurement] = {}
    repeated: dict[tuple[str, str], list[int]] = {}
    for number, data in read_jsonl(path):
        try:
            record = Measurement.from_dict(data)
        except (TypeError, ValueError) as exc:
            warnings.warn(f"{path}: dropped line {number}, not a record: {exc}", stacklevel=2)
            continue
        if record.key in out:
            repeated.setdefault(record.key, []).append(number)
        out[record.key] = record  # a repeated key keeps its first place and takes the last record
    if repeated:
        lines_named = ", ".join(str(n) for numbers in repeated.values() for n in numbers)
        warnings.warn(
            f"{path}: {len(repeated)} (case, provider) pairs recorded more than once; the last record of each "
            f"is kept (repeats on lines {lines_named})",
            stacklevel=2,
        )
    return [rejudge(r) for r in out.values()]


def read_runs(folders: Iterable[Path]) -> list[Measurement]:
    """The records of these run folders, in order, each `sol` re-read against the ceilings of the runs read
    together (raised by what their checked providers sustained: suite/ceilings.py), as every view states it."""
    from ..ceilings import read_sol  # the ceilings' read side asks `timed` of this module

    return read_sol([(folder, read_records(folder)) for folder in folders])


def read_launches(run_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """What each profiled call of a run launched (launches.jsonl), by (case_id, provider): the last line of
    a pair wins (a resumed run may have profiled it again)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for _, entry in read_jsonl(Path(run_dir) / LAUNCHES_FILE):
        if isinstance(entry, dict) and isinstance(entry.get("case_id"), str) and isinstance(entry.get("provider"), str):
            out[(entry["case_id"], entry["provider"])] = entry
    return out


# -- which folders a name means -------------------------------------------------------------------------


def is_path(given: str | Path) -> bool:
    """Whether a name is a folder's path (it holds a separator) rather than an id under the results folder."""
    return isinstance(given, Path) or any(sep in str(given) for sep in "/\\")


def valid_sweep_id(text: str) -> bool:
    return bool(_SWEEP_ID.match(text)) and ".." not in text


def sweeps_root(root: str | Path) -> Path:
    """Where a results folder's sweeps keep their state: inside it, so nothing is written elsewhere."""
    return Path(root) / SWEEPS_DIR


def holds_run(folder: Path) -> bool:
    """A run folder: one holding records, or the config of a run that has none yet."""
    return (folder / RECORDS_FILE).is_file() or (folder / CONFIG_FILE).is_file()


def run_folders_in(root: str | Path) -> list[Path]:
    """The run folders directly inside a folder (each holding records), by name."""
    root = Path(root)
    return sorted(p for p in root.iterdir() if (p / RECORDS_FILE).is_file()) if root.is_dir() else []


def find_run(given: str | Path, root: str | Path = RUNS_ROOT) -> Path | None:
    """The run folder a name means: a folder by its path, or a folder of that id under `root`; None where
    there is none."""
    if is_path(given):
        return Path(given) if Path(given).is_dir() else None
    name = str(given)
    if not name or name.startswith("."):
        return None
    candidate = Path(root) / name
    return candidate if candidate.is_dir() else None


def find_sweep(given: str, root: str | Path = RUNS_ROOT) -> str | None:
    """The sweep a name means: a sweep id under `root`, or the run id of one of its shards; None if neither."""
    if is_path(given) or not valid_sweep_id(str(given)):
        return None
    if (sweeps_root(root) / str(given) / SWEEP_FILE).is_file():
        return str(given)
    meta = runmeta.read(Path(root) / str(given))
    return meta.sweep if meta is not None and meta.sweep else None


def sweep_runs(root: str | Path, sweep_id: str) -> list[Path]:
    """The run folders of a sweep's shards (every launch), by name."""
    root = Path(root)
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    out = []
    for folder in folders:
        meta = runmeta.read(folder)
        if meta is not None and meta.sweep == sweep_id:
            out.append(folder)
    return out


def find_runs(given: str | Path, root: str | Path = RUNS_ROOT) -> list[Path]:
    """The run folders a name means, read as one run: a run folder, a run id, or a sweep id (all its
    shards' runs); [] where it means none."""
    found = find_run(given, root)
    if found is not None:
        return [found]
    if is_path(given) or not valid_sweep_id(str(given)) or not (sweeps_root(root) / str(given)).is_dir():
        return []
    return sweep_runs(root, str(given))


@dataclass(frozen=True)
class ResumeTarget:
    """What `resume=` names: a run (its results folder and id) or a sweep (its id), and the config it saved."""

    given: str
    results: Path  # the results folder the run or sweep lives in
    name: str  # the run id, or the sweep id
    sweep: bool
    # The config the run or sweep was launched with (it may be missing: the caller says so); None for a name
    # that can be no run id (empty, or starting with a dot: never a folder outside the results folder).
    config: Path | None


def resume_target(given: str, results: str | Path = RUNS_ROOT) -> ResumeTarget:
    """What `resume=<given>` finishes: a run folder by its path, else a sweep (by its id or a shard's run id),
    else a run id under `results`. The name is not checked here (suite/store/runfolder.py does, before any use)."""
    given = str(given)
    if is_path(given):
        folder = Path(given)
        return ResumeTarget(given, folder.parent, folder.name, False, folder / CONFIG_FILE)
    found = find_sweep(given, results)
    if found is not None:
        return ResumeTarget(given, Path(results), found, True, sweeps_root(results) / found / CONFIG_FILE)
    plain = bool(given) and not given.startswith(".")
    return ResumeTarget(given, Path(results), given, False, Path(results) / given / CONFIG_FILE if plain else None)
