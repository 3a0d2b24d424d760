"""asv result files written in asv 0.6's format (version 2, result_columns), for the history tests."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

COLUMNS = [
    "result",
    "params",
    "version",
    "started_at",
    "duration",
    "stats_ci_99_a",
    "stats_ci_99_b",
    "stats_q_25",
    "stats_q_75",
    "stats_number",
    "stats_repeat",
    "samples",
    "profile",
]


def write_result(
    results: Path,
    machine: str,
    commit: str,
    benchmarks: dict,
    version: str = "v1",
    env: str = "existing-py_python",
    started_at: int = 0,
) -> Path:
    """benchmarks: {name: {param label: samples (seconds) | None (failed) | "skip"}}; one file per commit."""
    folder = results / machine
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    rows = {}
    for name, by_param in benchmarks.items():
        values, samples = [], []
        for series in by_param.values():
            if series is None:
                values.append(None)
                samples.append(None)
            elif series == "skip":
                values.append(float("nan"))
                samples.append(None)
            else:
                values.append(statistics.median(series))
                samples.append(list(series))
        n = len(values)
        rows[name] = [
            values,
            [[repr(p) for p in by_param]],
            version,
            started_at,
            1.0,
            values,
            values,
            values,
            values,
            [1] * n,
            [len(s or []) for s in samples],
            samples,
        ]
    data = {
        "commit_hash": commit,
        "env_name": env,
        "date": 1700000000000,
        "params": {"machine": machine, "python": "3.11"},
        "python": "3.11",
        "requirements": {},
        "env_vars": {},
        "result_columns": COLUMNS,
        "results": rows,
        "durations": {},
        "version": 2,
    }
    path = folder / f"{commit[:8]}-{env}.json"
    # asv writes NaN as a bare token; json.dumps does the same.
    path.write_text(json.dumps(data))
    return path
