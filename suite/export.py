"""`tierbench export RUN... [--format csv|parquet|jsonl]`: runs' records as one flat table.

One row per measurement, the records of every run named (a run folder, a run id, or a results folder
holding run folders) together. The nested parts of a record become columns of their own: `case.rows`,
`quantiles_ms.p10`, `env.device_name`, `telemetry.sm_clock_mhz`, `errors.out`, and a model block's best mix
`composed.qkv`. A record measured as a part of a model's block says which (`block.model`, `block.phase`,
`block.part`, from its run's run.json), so the model view can be rebuilt from the table. `samples_ms` is left
out unless --samples (in CSV and Parquet as a JSON list, like every other list). `sol` and `bound` are read
against the ceilings of the runs exported, each raised to the best rate a checked provider of those runs
sustained (as `summary` and the site read them): a `sol` above 1 is a median in doubt (see `warning`). Reads
in one line:

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

from . import runmeta
from .blocks import part_of
from .ceilings import read_sol
from .presentation import Presentation
from .records import RECORDS_FILE, Measurement, find_run, read_records

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
        inside = sorted(p for p in folder.iterdir() if (p / RECORDS_FILE).is_file())
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


def write_csv(rows: list[dict[str, Any]], out: TextIO) -> None:
    writer = csv.DictWriter(out, fieldnames=columns(rows), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _scalar(v) for k, v in row.items()})


def write_jsonl(rows: list[dict[str, Any]], out: TextIO) -> None:
    names = columns(rows)
    for row in rows:
        out.write(json.dumps({k: row.get(k) for k in names}, separators=(",", ":"), default=str) + "\n")


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
    """Write the rows of every record of the folders; returns how many rows."""
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
    if fmt == "parquet":
        if out is None:
            raise ExportError("--format parquet writes a file: give --out FILE.parquet")
        write_parquet(rows, out)
        return len(rows)
    writer = write_csv if fmt == "csv" else write_jsonl
    if out is None:
        writer(rows, sys.stdout)
    else:
        with out.open("w", encoding="utf-8", newline="") as fh:
            writer(rows, fh)
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
    parser.add_argument("--runs-dir", type=Path, default=Path("results/runs"), help="where run ids are looked up")
    args = parser.parse_args(argv)
    fmt = args.format or (args.out.suffix.lstrip(".") if args.out and args.out.suffix[1:] in FORMATS else "csv")
    try:
        count = export(run_folders(args.runs, args.runs_dir), fmt, args.out, args.samples)
    except ExportError as exc:
        print(f"tierbench export: {exc}", file=sys.stderr)
        return 2
    if args.out is not None:
        print(f"wrote {args.out} ({count} rows, {fmt})", file=sys.stderr)
    return 0
