"""The device's limits: copy bandwidth and the best matmul rate per dtype (FP8 included).

Measured on the device itself (a large device-to-device copy; a large product through the vendor
library), never taken from a datasheet, and cached per device: in `ceilings_dir` where one is given, else in
the user's cache (the committed results/ceilings of a tierbench checkout are found too).

Read back (`Limits`, torch-free), a ceiling is at least the best rate any checked provider sustained on the
device in the records read together: a provider's kernel can beat the library call the ceiling was measured
with (a read-heavy kernel outruns a copy, a tuned kernel cuBLAS at one size), and a speed of light above
100% would say the limit is not one. Each raised ceiling names the measurement that set it; a record
whose median is not trusted (a wide spread) never sets one, and where its rate is above the ceiling its SOL
is flagged rather than shown as a fraction of it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .naming import slug
from .store.reading import timed
from .units import quantity, sig

if TYPE_CHECKING:  # torch is imported only to measure: the site reads ceilings without it
    import torch

    from .store.records import Measurement

# 3: the FP8 rate (torch._scaled_mm) joined; caches without it are measured again.
CEILINGS_VERSION = 3
FP8 = "fp8_e4m3"


@dataclass
class Ceilings:
    device_name: str
    copy_gbps: float  # bytes read + bytes written per second, in GB/s
    matmul_tflops: dict[str, float] = field(default_factory=dict)  # dtype name -> TFLOP/s
    method: str = ""
    version: int = CEILINGS_VERSION

    def peak_tflops(self, dtype: str) -> float | None:
        """The measured rate of `dtype`; for a dtype not measured, the best rate measured (a CPU measures
        fp32 only), except for FP8, whose peak is never a 16-bit one: None where no FP8 rate was measured."""
        if self.matmul_tflops.get(dtype):
            return self.matmul_tflops[dtype]
        if dtype.startswith("fp8"):
            return None
        return max(self.matmul_tflops.values(), default=None)


def device_name(device: torch.device) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return f"cpu {platform.machine()} x{torch.get_num_threads()} threads"


def _median_ms(fn, device: torch.device) -> float:
    from tierbench.timing import TimingSettings, make_timer

    # No CUDA graph: a device copy captured in a graph runs on the copy engines, far below the SMs' bandwidth.
    settings = TimingSettings(
        warmup_ms=50, rep_ms=200, rounds=3, min_reps=5, max_reps=200, flush_l2=False, cuda_graph=False
    )
    samples = make_timer(settings, device).measure({"x": fn})["x"]
    if isinstance(samples, BaseException):
        raise samples
    return statistics.median(samples)


def _copy_ms(n_bytes: int, device: torch.device) -> float:
    import torch

    src = torch.randn(n_bytes // 4, device=device)
    dst = torch.empty_like(src)
    return _median_ms(lambda: dst.copy_(src), device)


def _matmul_tflops(n: int, dtype: torch.dtype, device: torch.device) -> float:
    import torch

    a = torch.randn(n, n, device=device).to(dtype)  # random, never zeros: zeros run faster
    b = torch.randn(n, n, device=device).to(dtype)
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        ms = _median_ms(lambda: torch.matmul(a, b), device)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    return 2 * n**3 / (ms * 1e-3) / 1e12


def _fp8_matmul_tflops(n: int, device: torch.device) -> float:
    """torch._scaled_mm (cuBLASLt) on e4m3 operands, per-tensor scales, a bf16 output, fp32 accumulation
    (use_fast_accum off, as the suite's FP8 providers run)."""
    import torch

    a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).T  # column-major, as cuBLASLt takes it
    one = torch.ones((), device=device)
    ms = _median_ms(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), device)
    return 2 * n**3 / (ms * 1e-3) / 1e12


def _has_fp8(device: torch.device) -> bool:
    import torch

    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 9)


def measure(device: torch.device) -> Ceilings:
    import torch

    on_gpu = device.type == "cuda"
    # Big enough to dwarf any cache: 2 GiB on a GPU, 256 MiB on a CPU.
    n_bytes = (2 << 30) if on_gpu else (256 << 20)
    copy_ms = _copy_ms(n_bytes, device)
    copy_gbps = 2 * n_bytes / (copy_ms * 1e-3) / 1e9

    rates: dict[str, float] = {}
    dtypes = (
        {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32} if on_gpu else {"fp32": torch.float32}
    )
    for name, dtype in dtypes.items():
        # The best rate over a few large sizes: no single size is the library's best on every card.
        sizes = (4096, 8192) if on_gpu else (1024,)
        rates[name] = max(_matmul_tflops(n, dtype, device) for n in sizes)
    if _has_fp8(device):
        try:
            rates[FP8] = max(_fp8_matmul_tflops(n, device) for n in (4096, 8192))
        except RuntimeError:  # a torch without FP8 kernels for this GPU: FP8 cases then state no SOL
            pass
    method = (
        f"copy: median of {n_bytes >> 20} MiB device copies (read + write counted); "
        f"matmul: best median over square products (4096, 8192 on a GPU) through torch.matmul, "
        f"random inputs, TF32 off; {FP8} (FP8 GPUs): the same through torch._scaled_mm, per-tensor scales, "
        f"bf16 output, fast accumulation off"
    )
    return Ceilings(device_name(device), copy_gbps, rates, method)


def user_cache() -> Path:
    """Where measured ceilings are kept for the user: $XDG_CACHE_HOME/tierbench/ceilings (~/.cache/...)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tierbench" / "ceilings"


def default_folders() -> list[Path]:
    """Where ceilings are looked up without a `ceilings_dir`: the user's cache (where a new measurement goes),
    then the committed results/ceilings of the tierbench checkout this Python imports, if any."""
    from .measure import provenance

    folders = [user_cache()]
    root = provenance.checkout_root()
    if root is not None:
        folders.append(root / "results" / "ceilings")
    return folders


def _folders(folder: str | Path | None) -> list[Path]:
    return [Path(folder)] if folder else default_folders()


def cached(device: torch.device, folder: str | Path | None = None) -> Ceilings | None:
    """The ceilings cached for this device (in `folder`, or else in `default_folders()`), or None where none
    are (or the file is damaged or stale)."""
    name = f"{slug(device_name(device))}.json"
    for where in _folders(folder):
        try:
            data = json.loads((where / name).read_text())
            if data.get("version") == CEILINGS_VERSION:
                return Ceilings(**data)
        except (OSError, json.JSONDecodeError, TypeError, AttributeError):
            pass  # absent or damaged: measured again
    return None


def load_or_measure(device: torch.device, folder: str | Path | None = None, remeasure: bool = False) -> Ceilings:
    """The cached ceilings of this device, measured now if absent, stale or asked for.

    folder: the one folder to read and write; None looks in `default_folders()` and writes to the user's
    cache, so that a run in a new folder does not measure again."""
    found = None if remeasure else cached(device, folder)
    if found is not None:
        return found
    path = _folders(folder)[0] / f"{slug(device_name(device))}.json"
    ceilings = measure(device)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # two runs may measure at once
    tmp.write_text(json.dumps(asdict(ceilings), indent=2) + "\n")
    tmp.replace(path)
    return ceilings


RUN_CEILINGS_FILE = "ceilings.json"


def save_for_run(ceilings: Ceilings, run_dir: Path) -> None:
    """Keep, beside a run's records, the ceilings its SOL figures were computed against."""
    (run_dir / RUN_CEILINGS_FILE).write_text(json.dumps(asdict(ceilings), indent=2) + "\n")


def load_for_run(run_dir: Path) -> Ceilings | None:
    path = Path(run_dir) / RUN_CEILINGS_FILE
    try:
        return Ceilings(**json.loads(path.read_text()))
    except (OSError, json.JSONDecodeError, TypeError):
        return None


# -- read back: ceilings no checked measurement exceeds (torch-free) ---------------------------------------

COPY = "copy"  # the kind of the bandwidth ceiling; a compute ceiling's kind is its dtype


@dataclass(frozen=True)
class SetBy:
    """The checked measurement whose sustained rate set a ceiling above the measured one."""

    rate: float  # GB/s for the copy ceiling, TFLOP/s for a dtype's
    measured: float | None  # the measured ceiling it exceeded (None: that dtype was not measured)
    provider: str
    case: str  # op, shape, dtype and pass, as people read them
    run_id: str


@dataclass
class Limits:
    """A device's ceilings as records are read: the measured ones, each raised to the best rate a checked
    provider sustained in the records read with them (`set_by` names that measurement)."""

    device_name: str
    copy_gbps: float
    matmul_tflops: dict[str, float]
    method: str = ""
    set_by: dict[str, SetBy] = field(default_factory=dict)  # COPY or a dtype -> what set it

    def peak_tflops(self, dtype: str) -> float | None:
        return Ceilings(self.device_name, self.copy_gbps, self.matmul_tflops).peak_tflops(dtype)

    def sol(self, r: Measurement) -> tuple[float | None, str | None]:
        """A timed record's fraction of its binding ceiling and which ceiling binds ("compute", "memory"), as
        the runner computes them, against these ceilings; the record's own where it lacks a work model."""
        if not r.median_ms or r.flops is None or r.min_bytes is None:
            return r.sol, r.bound
        peak = self.peak_tflops(str(r.case.get("dtype", "")))
        if not peak:  # no ceiling for the case's precision (an FP8 rate not measured): no SOL at all
            return None, None
        compute_floor = r.flops / (peak * 1e12)
        memory_floor = r.min_bytes / (self.copy_gbps * 1e9)
        sol = max(compute_floor, memory_floor) / (r.median_ms * 1e-3)
        if 1.0 < sol < 1.0 + 1e-9:  # the record that set its ceiling, rounded on the way
            sol = 1.0
        return sol, "compute" if compute_floor >= memory_floor else "memory"

    def lines(self) -> list[str]:
        """Each ceiling in words, with what set it where a measurement raised it."""
        out = [f"copy {quantity(self.copy_gbps, 'GB/s', 4)}{self._why(COPY, 'GB/s')}"]
        out += [
            f"{dtype} matmul {quantity(rate, 'TFLOP/s', 4)}{self._why(dtype, 'TFLOP/s')}"
            for dtype, rate in self.matmul_tflops.items()
        ]
        return out

    def _why(self, kind: str, unit: str) -> str:
        by = self.set_by.get(kind)
        if by is None:
            return " (measured)"
        measured = f"measured {quantity(by.measured, unit, 4)}" if by.measured else "not measured for this dtype"
        return f" (sustained by {by.provider} on {by.case} in run {by.run_id}; {measured})"


def device_key(env: dict[str, Any]) -> str:
    """Which device records ran on, as records say it (a CPU with its thread count)."""
    name = str(env.get("device_name") or "unknown device")
    return f"{name} x{env.get('threads')} threads" if env.get("device_type") == "cpu" else name


def sets_ceilings(r: Measurement) -> bool:
    """Whether a record's rates are trusted to raise a ceiling: checked, timed, its median not in doubt."""
    return timed(r) and not r.warning


# A checked provider that sustained more than the measured ceiling raises it; one that claims more than this
# many times the measured ceiling is no sustained rate but a damaged or mistimed record (the committed H200
# runs raised a ceiling by at most 1.17x): it raises nothing, and its SOL reads "above its ceiling".
MAX_RAISE = 1.5


def limits(measured: Iterable[Ceilings | None], records: Iterable[Measurement]) -> Limits | None:
    """One device's ceilings: the best of each measured (several runs may have measured it), each raised
    to the best rate of the records that `sets_ceilings` (up to MAX_RAISE times it); None where none was
    measured."""
    found = [c for c in measured if c is not None]
    if not found:
        return None
    best = max(found, key=lambda c: c.copy_gbps)
    out = Limits(best.device_name, best.copy_gbps, {}, best.method)
    for c in found:
        for dtype, rate in c.matmul_tflops.items():
            out.matmul_tflops[dtype] = max(rate, out.matmul_tflops.get(dtype, 0.0))
    sustained: dict[str, SetBy] = {}
    for r in records:
        if not sets_ceilings(r):
            continue
        seconds = r.median_ms * 1e-3
        dtype = str(r.case.get("dtype", ""))
        case = " ".join(str(p) for p in (r.op, r.label, dtype, r.mode) if p)
        copy = r.min_bytes / seconds / 1e9 if r.min_bytes else None
        if copy is not None and copy <= MAX_RAISE * out.copy_gbps:
            _keep_best(sustained, COPY, SetBy(copy, None, r.provider, case, r.run_id))
        peak = out.peak_tflops(dtype)  # a dtype without a measured rate (FP8) states no SOL
        if r.flops and peak and r.flops / seconds / 1e12 <= MAX_RAISE * peak:
            _keep_best(sustained, dtype, SetBy(r.flops / seconds / 1e12, None, r.provider, case, r.run_id))
    if COPY in sustained and sustained[COPY].rate > out.copy_gbps:
        out.set_by[COPY] = dataclasses.replace(sustained.pop(COPY), measured=out.copy_gbps)
        out.copy_gbps = out.set_by[COPY].rate
    sustained.pop(COPY, None)
    measured_peaks = Ceilings(out.device_name, out.copy_gbps, dict(out.matmul_tflops))
    for dtype, by in sorted(sustained.items(), key=lambda kv: kv[1].rate):
        if by.rate > (out.peak_tflops(dtype) or 0.0):
            out.set_by[dtype] = dataclasses.replace(by, measured=measured_peaks.matmul_tflops.get(dtype))
            out.matmul_tflops[dtype] = by.rate
    return out


def _keep_best(best: dict[str, SetBy], kind: str, candidate: SetBy) -> None:
    if kind not in best or candidate.rate > best[kind].rate:
        best[kind] = candidate


def with_sol(records: list[Measurement], found: dict[str, Limits | None]) -> list[Measurement]:
    """The records with their SOL and bound re-read against their device's limits (`device_key` -> Limits);
    a record of a device without limits keeps its own."""
    out = []
    for r in records:
        device = found.get(device_key(r.env))
        if device is not None and r.median_ms:
            sol, bound = device.sol(r)
            if (sol, bound) != (r.sol, r.bound):
                r = dataclasses.replace(r, sol=sol, bound=bound)
        out.append(r)
    return out


def limits_per_device(
    runs: Iterable[tuple[Iterable[Ceilings | None], list[Measurement]]],
) -> dict[str, Limits | None]:
    """Per device (`device_key`), the limits of the runs read together: each run's measured ceilings (a
    sweep's shards may each have theirs) and its records."""
    measured: dict[str, list[Ceilings | None]] = {}
    records: dict[str, list[Measurement]] = {}
    for found, recs in runs:
        found = list(found)
        for key in {device_key(r.env) for r in recs}:
            measured.setdefault(key, []).extend(found)
        for r in recs:
            records.setdefault(device_key(r.env), []).append(r)
    return {key: limits(measured[key], records[key]) for key in records}


def read_sol(runs: list[tuple[Path, list[Measurement]]]) -> list[Measurement]:
    """The records of these run folders, in order, with their SOL re-read against the limits of the runs
    read together (what `summary` and `export` show)."""
    found = limits_per_device(([load_for_run(folder)], recs) for folder, recs in runs)
    return with_sol([r for _, recs in runs for r in recs], found)


ABOVE = "above its ceiling"


def sol_text(sol: float | None, digits: int = 3) -> str:
    """A SOL as people read it: '97.3%'; above 100% (a median in doubt, or no ceiling to re-read it against)
    it is not a fraction of the ceiling, and says so (ABOVE); '' for none."""
    if sol is None:
        return ""
    if sol > 1.0:
        return ABOVE
    return f"{sig(100 * sol, digits)}%"
