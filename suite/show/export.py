"""`tierbench export RUN... [--format csv|parquet|jsonl]`: runs' records as one flat table.

One row per measurement, the records of every run named (a run folder, a run id, or a results folder
holding run folders) together. The nested parts of a record become columns of their own: `case.rows`,
`quantiles_ms.p10`, `env.device_name`, `telemetry.sm_clock_mhz`, `errors.out`, and a model block's best mix
`composed.qkv`. A record measured as a part of a model's block says which (`block.model`, `block.phase`,
`block.part`, from its run's run.json), so the model view can be rebuilt from the table. `samples_ms` is left
out unless --samples (in CSV and Parquet as a JSON list, like every other list). `sol` and `bound` are read
against the ceilings of the runs exported, each raised to the best rate a checked provider of those runs
sustained (as `summary` and the site read them): a `sol` above 1 is a median in doubt (see `warning`). A CSV
cell of text that a spreadsheet would run as a formula (starting with =, +, -, @, a tab or a carriage return)
gets a leading apostrophe; on a terminal, control characters are written as their escapes. Reads in one line:

    pandas.read_csv("runs.csv")    pandas.read_parquet("runs.parquet")    pandas.read_json("runs.jsonl", lines=True)
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, TextIO

from ..ceilings import RUN_CEILINGS_FILE, read_sol
from ..store import runmeta
from ..store.reading import RUNS_ROOT, find_run, read_records, run_folders_in
from ..store.records import CONFIG_FILE, LAUNCHES_FILE, RECORDS_FILE, Measurement
from ..store.runfolder import LOCK_FILE
from ..store.runmeta import META_FILE
from ..text import plain, warnings_as_lines
from .blocks import part_of
from .presentation import Presentation

FORMATS = ("csv", "parquet", "jsonl")
_NESTED = ("case", "quantiles_ms", "telemetry", "env", "errors", "composed")


class ExportError(ValueError):
    """Bad input: a name that is no run, a format that cannot be written here; the message says what to do."""


def run_folders(given: list[str], runs_dir: Path) -> list[Path]:
    """The run folders named: a run folder, a run id under runs_dir, or a folder of run folders (each of them)."""
    out: list[Path] = []
    for name in given:
        folder = find_run(name, runs_dir)
        if folder is None:
            raise ExportError(f"{name} is neither a run folder nor a run id under {runs_dir}")
        if (folder / RECORDS_FILE).is_file():
            out.append(folder)
            continue
        inside = run_folders_in(folder)
        if not inside:
            raise ExportError(f"{folder} holds no records ({RECORDS_FILE}) and no run folders that do")
        out += inside
    return list(dict.fromkeys(out))


def flatten(record: Measurement, samples: bool = False) -> dict[str, Any]:
    """A record as one flat row: nested dicts become `part.key` columns."""
    data = asdict(record)
    row: dict[str, Any] = {}
    for name, value in data.items():
        if name == "samples_ms" and not samples:
            continue
        if name in _NESTED and isinstance(value, dict):
            for key, inner in value.items():
                row[f"{name}.{key}"] = inner
        else:
            row[name] = value
    return row


def columns(rows: list[dict[str, Any]]) -> list[str]:
    """Every column of the rows: a record's fields in their order, each nested part's keys as first seen."""
    seen: dict[str, None] = {}
    order = [f.name for f in fields(Measurement)]
    for name in order:
        for row in rows:
            for key in row:
                if key == name or key.startswith(f"{name}."):
                    seen.setdefault(key, None)
    for row in rows:  # anything else, at the end
        for key in row:
            seen.setdefault(key, None)
    return list(seen)


def _scalar(value: Any) -> Any:
    """A cell of a CSV or Parquet column: lists and dicts as JSON text."""
    return json.dumps(value, separators=(",", ":")) if isinstance(value, (list, dict)) else value


# A spreadsheet runs a cell that starts with one of these as a formula (=HYPERLINK(...), +cmd|...).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell no spreadsheet runs: text that would start a formula gets a leading apostrophe (the
    spreadsheets' own mark for text); numbers stay numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def write_csv(rows: list[dict[str, Any]], out: TextIO, shown: bool = False) -> None:
    """The rows as CSV; `shown` (a terminal): control characters in text written as their escapes."""
    names = columns(rows)
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([csv_cell(_shown(n, shown)) for n in names])
    for row in rows:
        writer.writerow([csv_cell(_shown(_scalar(row.get(k)), shown)) for k in names])


def _shown(value: Any, shown: bool) -> Any:
    return plain(value) if shown and isinstance(value, str) else value


def write_jsonl(rows: list[dict[str, Any]], out: TextIO, shown: bool = False) -> None:
    """The rows as JSON lines (control characters and all non-ASCII text are JSON escapes already)."""
    names = columns(rows)
    for row in rows:
        out.write(json.dumps({k: row.get(k) for k in names}, separators=(",", ":"), default=str) + "\n")


# Files of a run folder that tierbench writes and reads back: never an export's target.
RUN_FILES = (RECORDS_FILE, CONFIG_FILE, META_FILE, LAUNCHES_FILE, RUN_CEILINGS_FILE, "report.html", LOCK_FILE)


def check_target(out: Path) -> None:
    """ExportError where writing `out` would destroy a run's own file or cannot work (a folder)."""
    if out.is_dir():
        raise ExportError(f"--out {out} is a folder: give a file name (runs.csv)")
    folder = out.resolve().parent
    if out.name in RUN_FILES and ((folder / RECORDS_FILE).exists() or (folder / CONFIG_FILE).exists()):
        raise ExportError(f"--out {out} is a run's own {out.name}: give a file outside the run's files")


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError(
            "--format parquet needs pyarrow: pip install 'tierbench[export]' (or pip install pyarrow)"
        ) from None
    arrays = {}
    for name in columns(rows):
        values = [_scalar(row.get(name)) for row in rows]
        try:
            arrays[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # a column of mixed types (older records): as text
            arrays[name] = pa.array([None if v is None else str(v) for v in values], type=pa.string())
    pq.write_table(pa.table(arrays), path)


def export(folders: list[Path], fmt: str, out: Path | None, samples: bool = False) -> int:
    """Write the rows of every record of the folders; returns how many rows. The folder of `out` is made
    where it is missing; a run's own files are never a target (ExportError)."""
    if out is not None:
        check_target(out)
    # SOL re-read as every reader states it: against ceilings no checked measurement of these runs exceeds.
    read = [(folder, read_records(folder)) for folder in folders]
    # Per record, its run's model-block parts (case id -> model, phase, part): read_sol keeps the order.
    block_parts = [part_of(Presentation.of([runmeta.read(folder)])) for folder, _ in read]
    owners = [parts for parts, (_, recs) in zip(block_parts, read) for _ in recs]
    rows = []
    for r, parts in zip(read_sol(read), owners):
        row = flatten(r, samples)
        if r.case_id in parts:
            row["block.model"], row["block.phase"], row["block.part"] = parts[r.case_id]
        rows.append(row)
    if fmt == "parquet" and out is None:
        raise ExportError("--format parquet writes a file: give --out FILE.parquet")
    if out is None:
        (write_csv if fmt == "csv" else write_jsonl)(rows, sys.stdout, shown=True)
        return len(rows)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "parquet":
            write_parquet(rows, out)
        else:
            with out.open("w", encoding="utf-8", newline="") as fh:
                (write_csv if fmt == "csv" else write_jsonl)(rows, fh)
    except OSError as exc:
        raise ExportError(f"cannot write --out {out}: {exc.strerror or exc}") from None
    return len(rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="tierbench export",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run folder, run id, or a folder of run folders")
    parser.add_argument("--format", choices=FORMATS, help="default: from --out's suffix, else csv")
    parser.add_argument("--out", type=Path, help="file to write (default: standard output; parquet needs one)")
    parser.add_argument("--samples", action="store_true", help="include every sample (samples_ms)")
    parser.add_argument("--runs-dir", type=Path, default=Path(RUNS_ROOT), help="where run ids are looked up")
    args = parser.parse_args(argv)
    fmt = args.format or (args.out.suffix.lstrip(".") if args.out and args.out.suffix[1:] in FORMATS else "csv")
    try:
        with warnings_as_lines("tierbench export"):
            count = export(run_folders(args.runs, args.runs_dir), fmt, args.out, args.samples)
    except ExportError as exc:
        print(f"tierbench export: {plain(str(exc))}", file=sys.stderr)
        return 2
    if args.out is not None:
        print(plain(f"wrote {args.out} ({count} rows, {fmt})"), file=sys.stderr)
    return 0
