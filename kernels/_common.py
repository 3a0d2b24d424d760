"""Shared helpers for the Triton kernels: interpreter detection, input validation, device facts.

Validation runs before any allocation, and every error names the offending argument and its value.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import torch
import triton
import triton.language as tl

# Decided once, at import, like `triton.jit` itself decides between compiling and interpreting.
INTERPRET: bool = os.environ.get("TRITON_INTERPRET") == "1"

# Multiprocessor count assumed under the interpreter: small, so that persistent loops still run
# several tiles per program on small test shapes.
_INTERPRET_NUM_SMS = 4

_INTERPRETED: tl.constexpr = tl.constexpr(INTERPRET)

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
HALF_DTYPES = (torch.float16, torch.bfloat16)
# Head dims the attention kernels take (powers of two: a tile's head_dim is one tl.arange).
ATTENTION_HEAD_DIMS = (16, 32, 64, 128, 256)


class Export(NamedTuple):
    """A public kernel as its module declares it (`EXPORTS = {name: Export(...)}`; the package exports it):
    the input dtypes it takes, the launch log its forward writes (what a record names as its launch), and
    the compute capability it needs with what for, if any."""

    dtypes: tuple[torch.dtype, ...]
    launch_log: str
    needs: tuple[tuple[int, int], str] | None = None


def _dtype_names(dtypes: Iterable[torch.dtype]) -> str:
    return ", ".join(str(d).replace("torch.", "") for d in dtypes)


def check_tensor(
    fn: str,
    name: str,
    t: object,
    *,
    dtypes: Sequence[torch.dtype] = FLOAT_DTYPES,
    ndim: int | None = None,
    min_ndim: int | None = None,
    ndim_hint: str = "",
) -> torch.Tensor:
    """Check that `t` is a tensor on a usable device with an accepted dtype and rank; return it."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if INTERPRET:
        if t.device.type not in ("cpu", "cuda"):
            raise ValueError(f"{fn}: {name} must be on a CPU or CUDA device, got device {t.device}")
    elif t.device.type != "cuda":
        raise ValueError(f"{fn}: {name} must be a CUDA tensor (or CPU with TRITON_INTERPRET=1), got device {t.device}")
    if t.dtype not in dtypes:
        raise TypeError(f"{fn}: {name} must have dtype in ({_dtype_names(dtypes)}), got {t.dtype}")
    if ndim is not None and t.dim() != ndim:
        hint = f" {ndim_hint}" if ndim_hint else ""
        raise ValueError(f"{fn}: {name} must be {ndim}-D{hint}, got shape {tuple(t.shape)}")
    if min_ndim is not None and t.dim() < min_ndim:
        raise ValueError(f"{fn}: {name} must have at least {min_ndim} dims, got shape {tuple(t.shape)}")
    return t


def check_same_device(fn: str, **tensors: torch.Tensor | None) -> None:
    """All given tensors must live on one device."""
    items = [(n, t) for n, t in tensors.items() if t is not None]
    first_name, first = items[0]
    for name, t in items[1:]:
        if t.device != first.device:
            raise ValueError(
                f"{fn}: {name} must be on the same device as {first_name} ({first.device}), got {t.device}"
            )


def check_eps(fn: str, eps: object) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"{fn}: eps must be a float, got {type(eps).__name__}")
    if not eps >= 0.0:  # also rejects NaN
        raise ValueError(f"{fn}: eps must be >= 0, got {eps}")
    return float(eps)


def tma_compatible(t: torch.Tensor) -> bool:
    """TMA needs a unit last stride, 16-byte aligned other strides and a 16-byte aligned base."""
    if t.stride(-1) != 1 and t.shape[-1] != 1:
        return False
    esize = t.element_size()
    if t.data_ptr() % 16 != 0:
        return False
    return all((s * esize) % 16 == 0 for s in t.stride()[:-1])


@functools.cache
def compute_capability(device: torch.device) -> tuple[int, int]:
    """(major, minor) of a CUDA `device`, asked of the driver once per device."""
    return torch.cuda.get_device_capability(device)


def is_hopper(device: torch.device) -> bool:
    """Whether `device` is an sm_90 GPU (what the Gluon kernels are written for); False under the interpreter."""
    return not INTERPRET and device.type == "cuda" and compute_capability(device) == (9, 0)


def has_tma(device: torch.device) -> bool:
    """Whether `device` is a GPU with TMA (sm_90 and newer); False under the interpreter."""
    return not INTERPRET and device.type == "cuda" and compute_capability(device)[0] >= 9


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def num_sms(device: torch.device) -> int:
    """Multiprocessor count of `device`, for persistent grids (a small constant under the interpreter)."""
    if INTERPRET or device.type != "cuda":
        return _INTERPRET_NUM_SMS
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


def on_device(t: torch.Tensor) -> contextlib.AbstractContextManager:
    """Make t's GPU current for the launch (Triton launches on the current device), if it is a GPU."""
    return torch.cuda.device(t.device) if t.device.type == "cuda" else contextlib.nullcontext()


def _torch_allocator(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    # Scratch for device-side TMA descriptors (128 bytes each); the caching allocator makes this cheap.
    device = "cpu" if INTERPRET else "cuda"
    return torch.empty(size, dtype=torch.int8, device=device)


def ensure_allocator() -> None:
    """Give Triton a scratch allocator for `tl.make_tensor_descriptor`, unless one is set already."""
    try:
        from triton.runtime import _allocation

        current = _allocation._allocator.get()
        if not isinstance(current, _allocation.NullAllocator):
            return
    except (ImportError, AttributeError):  # private API moved: just set ours
        pass
    triton.set_allocator(_torch_allocator)


def next_pow2(n: int) -> int:
    return triton.next_power_of_2(max(int(n), 1))


# What each family's latest launch ran (the autotuner's pick, or the forced config), for benchmark records:
# a kernel's speed is a fact about a config, and the pick can differ from run to run. Launchers store the
# config and its kind (one pair per kernel where a call runs several) with the launch's place in this
# process's order; the line is formatted only when read, so repeated (timed) calls pay one dict store.
_LAST_LAUNCH: dict[str, tuple[int, tuple[tuple[triton.Config, str], ...]]] = {}
_LAUNCH_ORDER = itertools.count()
BACKWARD_SUFFIX = "-bwd"  # a backward's launch log is its family's name and this ("norm-bwd", "matmul-bwd")


def describe_config(config: triton.Config, kind: str) -> str:
    """One line naming a config: its kind (kernel path or program kind), meta-parameters, warps, stages."""
    params = ", ".join(f"{k}={v}" for k, v in config.kwargs.items())
    return f"{kind}: {params}, warps={config.num_warps}, stages={config.num_stages}"


def note_launch(family: str, config: triton.Config, kind: str, *more: tuple[triton.Config, str]) -> None:
    """Record a family's launch: its config and kind, then (config, kind) of any further kernels it ran."""
    _LAST_LAUNCH[family] = (next(_LAUNCH_ORDER), ((config, kind), *more))


def last_launch(family: str) -> str | None:
    """The config of the family's latest launch in this process ("matmul", "norm", "attention", and the
    backwards "norm-bwd", "attention-bwd"), or None; the kernels of a several-kernel launch joined by "; "."""
    launch = _LAST_LAUNCH.get(family)
    return "; ".join(describe_config(*kernel) for kernel in launch[1]) if launch else None


def launch_with_backward(family: str) -> str | None:
    """The family's latest forward launch, then every backward launched after it (each "| <log>: ..."): a
    record of a backward names the kernels its timed call ran, not only the forward that built the graph.
    None if the family never launched."""
    forward = _LAST_LAUNCH.get(family)
    if forward is None:
        return None
    later = sorted(
        (order, name)
        for name, (order, _) in _LAST_LAUNCH.items()
        if name.endswith(BACKWARD_SUFFIX) and order > forward[0]
    )
    return " | ".join([last_launch(family), *(f"{name}: {last_launch(name)}" for _, name in later)])


@triton.jit
def round_to(x, DTYPE: tl.constexpr):
    """x (fp32) rounded to DTYPE, to nearest even as on the GPU. The interpreter truncates fp32 -> bf16
    (up to a whole ulp off): there, half an ulp is added to the bits first."""
    if _INTERPRETED and DTYPE == tl.bfloat16:
        bits = x.to(tl.uint32, bitcast=True)
        x = (bits + (0x7FFF + ((bits >> 16) & 1))).to(tl.float32, bitcast=True)
    return x.to(DTYPE)
