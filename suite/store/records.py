"""Run records: one JSON object per measurement, appended to measurements.jsonl as each one finishes.

A record once written is never rewritten. A kill in mid-write can leave a truncated last line: readers
(suite/store/reading.py) drop it with a warning, and a resumed run cuts it off before appending.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import secrets
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .runfolder import check_run_id

RECORDS_FILE = "measurements.jsonl"
CONFIG_FILE = "config.yaml"
# What each profiled call launched, one line per measurement beside the records (suite/measure/profiling.py).
LAUNCHES_FILE = "launches.jsonl"
STATUSES = ("ok", "skipped", "incorrect", "oom", "error")

# How running out of memory reads in an exception's text, whichever runtime's allocator raised it: such a
# measurement is `oom`, not `error` (as it is measured, and when an older record is read again).
OOM_TEXTS = (
    "out of memory",
    "outofmemoryerror",
    "can't allocate memory",
    "cannot allocate memory",
    "not enough memory",
)


# How a reason starts where the last timed call of a provider whose checked call passed raised, or where that
# call's output could not be checked: nothing wrong was seen, so such a record is `oom` or `error`.
LAST_CALL_RAISED = "after the timed rounds its call raised "
LAST_OUTPUT_UNCHECKED = "its last timed output could not be checked: "


def reads_as_oom(text: str) -> bool:
    """Whether an exception's (or a reason's) text says it ran out of memory."""
    lowered = text.lower()
    return any(t in lowered for t in OOM_TEXTS)


@dataclass
class Measurement:
    """One record: one provider on one case, its status and reason, its times and what was checked (the
    README's measurements.jsonl lists the fields)."""

    run_id: str
    op: str
    family: str
    case: dict[str, Any]
    case_id: str
    label: str
    x: float
    provider: str
    tier: str
    status: str
    reason: str = ""
    median_ms: float | None = None
    min_ms: float | None = None
    quantiles_ms: dict[str, float] = field(default_factory=dict)
    samples_ms: list[float] = field(default_factory=list)
    timer: str | None = None
    flops: float | None = None
    min_bytes: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    sol: float | None = None  # achieved fraction of the binding ceiling, 0..1
    bound: str | None = None  # "compute" or "memory": which ceiling binds this case
    rel_error: float | None = None
    tolerance: float | None = None
    peak_mem_bytes: int | None = None
    prepare_s: float | None = None  # preparation plus first call (compilation lands here, never in timing)
    provider_version: str | None = None
    launch: str | None = None  # what the provider launched, where it says (the triton tier: the autotuner's pick)
    telemetry: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=time.time)
    suite: str = ""  # the suite the run measured (older records: empty, the run's config.yaml says)
    own_code: bool | None = None  # the tier is the project's (or a plugin's) own code; None in older records
    element_error: float | None = None  # max |out - ref| / (rms(ref) + |ref|) over the outputs checked
    errors: dict[str, float | None] = field(default_factory=dict)  # norm-wise error per output compared ("dx")
    element_errors: dict[str, float] = field(default_factory=dict)  # elementwise error per output compared
    element_tolerances: dict[str, float] = field(default_factory=dict)  # the elementwise bound each was held to
    executed_flops: float | None = None  # what the provider executes where it differs from `flops`
    launches: int | None = None  # kernels (on a CPU: operators) one call launched, profiled outside timing
    launches_reason: str = ""  # why `launches` is null
    traffic_bytes: float | None = None  # device-memory bytes read + written per call (ncu's DRAM counters)
    traffic_reason: str = ""  # why `traffic_bytes` is null where it was asked for (metrics=[traffic])
    sweep: str | None = None  # the sweep this record's run is a shard of (suite/scale/sweep.py)
    shard: str | None = None  # "index/count" within the sweep
    # The sweep's other shards running on this host while the case was measured (shard, run, device).
    neighbours: list[dict[str, Any]] = field(default_factory=list)
    warning: str = ""  # a timed record whose numbers deserve doubt says why (runner.WIDE_SPREAD); else empty
    # A composed provider's choice per part of its composite op (a model block's best mix): part -> provider.
    composed: dict[str, str] = field(default_factory=dict)
    # Set by readers, never written: where today's bounds judge the stored errors otherwise than the check did
    # when the record was made, what changed (suite/store/verdicts.py); the status and reason are then today's.
    verdict_note: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {STATUSES}")
        for name, kinds in _FIELD_TYPES.items():
            value = getattr(self, name)
            if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
                raise TypeError(f"field {name!r} holds {type(value).__name__}, expected {_type_names(kinds)}")
        for name in _NUMBERS_BY_NAME:
            if not all(isinstance(k, str) and _is_number(v) for k, v in getattr(self, name).items()):
                raise TypeError(f"field {name!r} must map names to numbers")
        # An output that could not be compared (not a tensor, NaN in it) has no error: older records say null.
        if not all(isinstance(k, str) and (v is None or _is_number(v)) for k, v in self.errors.items()):
            raise TypeError("field 'errors' must map names to numbers (or null)")
        if not all(_is_number(v) for v in self.samples_ms):
            raise TypeError("field 'samples_ms' must be a list of numbers")
        for name in ("case", "env", "telemetry"):
            if not all(isinstance(k, str) for k in getattr(self, name)):
                raise TypeError(f"field {name!r} must have names as keys")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in self.composed.items()):
            raise TypeError("field 'composed' must map part names to provider names")

    @property
    def mode(self) -> str:
        return str(self.case.get("mode", "fwd"))

    @property
    def key(self) -> tuple[str, str]:
        return (self.case_id, self.provider)

    def to_json(self) -> str:
        return json.dumps(_finite(asdict(self)), separators=(",", ":"), allow_nan=False, default=str)

    @classmethod
    def from_dict(cls, data: Any) -> Measurement:
        """A record from its JSON object; TypeError or ValueError for anything of another shape."""
        if not isinstance(data, dict):
            raise TypeError(f"a record is a JSON object, got {type(data).__name__}")
        # NaN and Infinity are not JSON, but Python's reader takes them: read as the null a writer writes.
        known = {k: _finite(v) for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


_NUM = (int, float)
_OPT_NUM = (int, float, type(None))
_OPT_STR = (str, type(None))
# What each field may hold when read back: a record of another shape is damaged, and dropped with a warning.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "run_id": (str,),
    "op": (str,),
    "family": (str,),
    "case": (dict,),
    "case_id": (str,),
    "label": (str,),
    "x": _NUM,
    "provider": (str,),
    "tier": (str,),
    "status": (str,),
    "reason": (str,),
    "median_ms": _OPT_NUM,
    "min_ms": _OPT_NUM,
    "quantiles_ms": (dict,),
    "samples_ms": (list,),
    "timer": _OPT_STR,
    "flops": _OPT_NUM,
    "min_bytes": _OPT_NUM,
    "tflops": _OPT_NUM,
    "gbps": _OPT_NUM,
    "sol": _OPT_NUM,
    "bound": _OPT_STR,
    "rel_error": _OPT_NUM,
    "tolerance": _OPT_NUM,
    "peak_mem_bytes": (int, type(None)),
    "prepare_s": _OPT_NUM,
    "provider_version": _OPT_STR,
    "launch": _OPT_STR,
    "telemetry": (dict,),
    "env": (dict,),
    "time": _NUM,
    "suite": (str,),
    "own_code": (bool, type(None)),
    "element_error": _OPT_NUM,
    "errors": (dict,),
    "element_errors": (dict,),
    "element_tolerances": (dict,),
    "executed_flops": _OPT_NUM,
    "launches": (int, type(None)),
    "launches_reason": (str,),
    "traffic_bytes": _OPT_NUM,
    "traffic_reason": (str,),
    "sweep": _OPT_STR,
    "shard": _OPT_STR,
    "neighbours": (list,),
    "warning": (str,),
    "composed": (dict,),
    "verdict_note": (str,),
}


_NUMBERS_BY_NAME = ("quantiles_ms", "element_errors", "element_tolerances")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_names(kinds: tuple[type, ...]) -> str:
    return " or ".join("null" if k is type(None) else k.__name__ for k in kinds)


def _finite(value: Any) -> Any:
    """JSON has no NaN or Infinity: a non-finite number is stored as null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def create_run_dir(results_dir: str | Path, run_id: str | None = None) -> tuple[str, Path]:
    """Make a fresh run folder; mkdir without exist_ok means two runs can never share one."""
    if run_id:
        check_run_id(run_id)
    root = Path(results_dir)
    root.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        rid = run_id or new_run_id()
        path = root / rid
        try:
            path.mkdir()
            return rid, path
        except FileExistsError:
            if run_id:
                raise FileExistsError(
                    f"run folder {path} exists already: choose another run_id, or finish that run with resume={run_id}"
                ) from None
    raise RuntimeError(f"could not create a new run folder under {root}")


def _cut_partial_tail(path: Path) -> None:
    """Drop bytes after the last newline: the remains of a write that a kill interrupted."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        warnings.warn(f"{path}: cut a truncated last record ({len(data) - keep} bytes) before resuming", stacklevel=2)
        with path.open("r+b") as f:
            f.truncate(keep)


class JsonLines:
    """Appends lines to a file of a run folder, each one flushed to disk before the next starts; a line left
    half-written by a kill is cut off first."""

    def __init__(self, path: Path) -> None:
        self.path = path
        _cut_partial_tail(self.path)

    def append_line(self, text: str) -> None:
        """Append one line, or raise OSError (a full disk) with the file as it was before the call."""
        data = (text + "\n").encode()
        # One write of a whole line in append mode: concurrent writers of one file never interleave lines.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                written = os.write(fd, data)
                while written < len(data):  # a short write: the disk filled up, or a signal came
                    more = os.write(fd, data[written:])
                    if more == 0:
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))
                    written += more
                os.fsync(fd)
            except OSError:
                with contextlib.suppress(OSError):  # no half record stays behind: those before are intact
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)


class RecordWriter(JsonLines):
    """Appends records to a run's measurements.jsonl."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(run_dir / RECORDS_FILE)

    def append(self, record: Measurement) -> None:
        self.append_line(record.to_json())
