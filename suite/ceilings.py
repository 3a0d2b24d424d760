"""The device's measured limits: copy bandwidth and the best matmul rate per dtype (FP8 included).

Measured on the device itself (a large device-to-device copy; a large product through the vendor
library), never taken from a datasheet, and cached per device under `ceilings_dir`.
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .naming import slug

if TYPE_CHECKING:  # torch is imported only to measure: the site reads ceilings without it
    import torch

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


def cached(device: torch.device, folder: str | Path) -> Ceilings | None:
    """The ceilings cached for this device, or None where none are (or the file is damaged or stale)."""
    path = Path(folder) / f"{slug(device_name(device))}.json"
    try:
        data = json.loads(path.read_text())
        if data.get("version") == CEILINGS_VERSION:
            return Ceilings(**data)
    except (OSError, json.JSONDecodeError, TypeError, AttributeError):
        pass  # a damaged cache is measured again
    return None


def load_or_measure(device: torch.device, folder: str | Path, remeasure: bool = False) -> Ceilings:
    """The cached ceilings of this device, measured now if absent, stale or asked for."""
    path = Path(folder) / f"{slug(device_name(device))}.json"
    found = None if remeasure else cached(device, folder)
    if found is not None:
        return found
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
