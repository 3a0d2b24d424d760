"""Measured device-memory traffic of one call: Nsight Compute's DRAM counters (`metrics=[traffic]`).

`ncu` runs a child process that rebuilds one measurement of the run (`tierbench profile ... --under-ncu`),
makes its first call (compilation, autotuning) outside any range, then runs the pass once more inside the
NVTX range `tierbench`; only the kernels of that range are profiled, each one replayed with the caches
flushed (ncu's default), so `dram__bytes_read.sum + dram__bytes_write.sum` summed over them is what one
cold call moves through device memory. Memsets and memcpys are not kernels: ncu does not count them.
Where the counters cannot be read the record says why instead (no ncu on PATH, no GPU, counters refused).
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from ..store.records import CONFIG_FILE

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
NVTX_RANGE = "tierbench"
CHILD_TIMEOUT_S = 900  # compilation and autotuning of the one provider, then its kernels replayed
_PREFIXES = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
PERMISSION_REASON = (
    "GPU performance counters are not accessible here (ERR_NVGPUCTRPERM): they need root or the driver's "
    "NVreg_RestrictProfilingToAdminUsers=0, and a container may refuse them outright"
)


def why_not(device: torch.device, run_dir: Path) -> str | None:
    """Why traffic cannot be measured here, or None."""
    if shutil.which("ncu") is None:
        return "ncu (Nsight Compute) is not on PATH"
    if device.type != "cuda":
        return f"needs a CUDA GPU (running on {device.type})"
    if not (Path(run_dir) / CONFIG_FILE).exists():
        return f"needs a run folder with its {CONFIG_FILE} (tierbench run measures traffic)"
    return None


def child_command(run_dir: Path, case_id: str, provider: str) -> list[str]:
    """The process that ncu profiles: one measurement of the run, its profiled call inside NVTX_RANGE."""
    cli = [sys.executable, "-m", "tierbench.suite.cli", "profile", str(run_dir), case_id, provider]
    return [*cli, "--under-ncu"]


def ncu_command(ncu: str, log: Path, child: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    return [
        ncu,
        "--metrics",
        ",".join(METRICS),
        "--nvtx",
        "--nvtx-include",
        f"{NVTX_RANGE}/",  # a push/pop range is named with a trailing slash
        "--target-processes",
        "all",
        "--print-units",
        "base",
        "--csv",
        "--log-file",
        str(log),
        *extra,
        *child,
    ]


def _bytes(value: str, unit: str) -> float | None:
    """A metric value in bytes ("1,048,576" byte, "1.05" Mbyte, "2" KB), or None for n/a or an unknown unit."""
    prefix = unit.strip().lower().removesuffix("bytes").removesuffix("byte").removesuffix("b")
    try:
        number = float(value.replace(",", "").strip())
    except ValueError:
        return None
    scale = _PREFIXES.get(prefix)
    return None if scale is None else number * scale


def parse_ncu_csv(text: str) -> tuple[float | None, str]:
    """DRAM bytes read + written over every kernel of ncu's CSV (its details page, one row per kernel and
    metric); (None, why) where that cannot be read. Lines before the header (ncu's own) are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return None, "ncu printed no metrics (no kernel inside the profiled range?)"
    totals = dict.fromkeys(METRICS, 0.0)
    kernels = set()
    for row in csv.DictReader(lines[start:]):
        name = row.get("Metric Name")
        if name not in totals:
            continue
        value = _bytes(row.get("Metric Value") or "", row.get("Metric Unit") or "")
        if value is None:
            unit = row.get("Metric Unit")
            return None, f"ncu gave {name} of kernel {row.get('Kernel Name')!r} as {row.get('Metric Value')!r} {unit}"
        totals[name] += value
        kernels.add(row.get("ID"))
    if not kernels:
        return None, "ncu printed no DRAM metrics (no kernel inside the profiled range?)"
    return sum(totals.values()), ""


def _failure(output: str, returncode: int) -> str | None:
    if "ERR_NVGPUCTRPERM" in output:
        return PERMISSION_REASON
    if returncode != 0:
        errors = [line.strip() for line in output.splitlines() if "ERROR" in line or "Error" in line]
        return f"ncu exited with status {returncode}: {(errors or ['(no message)'])[-1]}"[:300]
    return None


def run_ncu(ncu: str, run_dir: Path, case_id: str, provider: str, timeout: float = CHILD_TIMEOUT_S):
    """(bytes per call, "") from ncu over one measurement of the run, or (None, why)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "ncu.csv"
        command = ncu_command(ncu, log, child_command(run_dir, case_id, provider))
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"ncu did not finish within {timeout:g} s"
        except OSError as exc:
            return None, f"ncu could not be started: {exc}"
        text = log.read_text(errors="replace") if log.exists() else ""
        failed = _failure("\n".join((text, done.stdout, done.stderr)), done.returncode)
        if failed:
            return None, failed
        return parse_ncu_csv(text or done.stdout)


def measure(run_dir: Path, case_id: str, provider: str, device: torch.device) -> dict[str, object]:
    """The record's traffic fields for one measurement of a run."""
    why = why_not(device, run_dir)
    if why:
        return {"traffic_bytes": None, "traffic_reason": why}
    found, reason = run_ncu(shutil.which("ncu") or "ncu", run_dir, case_id, provider)
    return {"traffic_bytes": found, "traffic_reason": reason}


def write_report(run_dir: Path, case_id: str, provider: str, out: Path) -> tuple[Path | None, str]:
    """An ncu report (every section of ncu's full set) of one measurement's profiled call: (path, "") or
    (None, why)."""
    ncu = shutil.which("ncu")
    if ncu is None:
        return None, "ncu (Nsight Compute) is not on PATH"
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "ncu.log"
        extra = ("--set", "full", "--force-overwrite", "--export", str(out))
        command = ncu_command(ncu, log, child_command(run_dir, case_id, provider), extra)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None, f"ncu did not finish within {CHILD_TIMEOUT_S} s"
        text = log.read_text(errors="replace") if log.exists() else ""
        failed = _failure("\n".join((text, done.stdout, done.stderr)), done.returncode)
    if failed:
        return None, failed
    report = out.with_name(out.name + ".ncu-rep") if out.suffix != ".ncu-rep" else out
    return (report, "") if report.exists() else (None, "ncu wrote no report (no kernel inside the profiled range?)")
