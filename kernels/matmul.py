"""Matrix product C = A @ B for 2-D fp16 / bf16 / fp32 inputs, any M, N, K, with an optional epilogue.

Two kernels, both specialised by constexprs for an epilogue applied to the fp32 tile in registers before
the one store (a bias of shape (N,), then GELU, exact or tanh; optionally the pre-activation stored too,
for a backward): `epilogue.matmul_bias_gelu` launches them so; plain `matmul` with the epilogue off.
- `_matmul_tma_kernel` (Hopper fast path): persistent grid of one program per SM, output tiles walked in
  grouped order (GROUP_M row-tiles share B column panels in L2), A/B/C moved by TMA through device-side
  tensor descriptors (out-of-bounds reads zero-filled, stores clipped, so ragged edges need no masks),
  software-pipelined K loop, fp32 accumulation, epilogue split in two half-width stores to cut the
  registers and shared memory held by the output tile. Each operand may be row-major or column-major
  (A_COL_MAJOR / B_COL_MAJOR): a column-major operand is described as the row-major tensor it is the
  transpose of, and its tiles transposed in registers, so transposed views need no copy.
- `_matmul_ptr_kernel`: plain pointer-based tiled kernel for inputs TMA cannot describe (no unit stride,
  or strides not 16-byte aligned, e.g. K or N odd), for small 16-bit products (`prefers_pointer`), and for
  GPUs older than Hopper.

A third, `_matmul_hopper_ws` (Gluon, sm_90, 16-bit), runs the same epilogue in one warpgroup while another
computes the next tile, a loader warp feeding both: `launch_matmul(..., path="ws")`, forced only (timed on an
H100 it trailed the TMA kernel at most sizes; docs/performance.md).

`matmul` is differentiable (a `torch.autograd.Function`): dA = dC B^T and dB = A^T dC run the same kernels
on transposed views (family "matmul-bwd" in `last_launch`, its kind naming the gradient).
fp32 inputs use TF32 tensor cores only when torch allows it (`torch.get_float32_matmul_precision()`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from . import _activations as activations
from ._activations import activate
from ._common import (
    FLOAT_DTYPES,
    HALF_DTYPES,
    INTERPRET,
    Export,
    check_same_device,
    check_tensor,
    ensure_allocator,
    has_tma,
    is_hopper,
    note_launch,
    num_sms,
    on_device,
)

# ----------------------------------------------------------------------------------------------------------
# Configs
# ----------------------------------------------------------------------------------------------------------

# Shared memory a Hopper block may use (227 KiB).
_SMEM_LIMIT = 232448


def _cfg(bm, bn, bk, warps, stages, group_m=8, subtile=False, ws=False, flatten=True) -> triton.Config:
    kw = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m}
    return triton.Config(
        {**kw, "EPI_SUBTILE": subtile, "WARP_SPECIALIZE": ws, "FLATTEN": flatten},
        num_warps=warps,
        num_stages=stages,
    )


def matmul_tma_configs() -> list[triton.Config]:
    """Candidate configs of the persistent TMA kernel (one small config under the interpreter)."""
    if INTERPRET:
        return [_cfg(32, 32, 16, 4, 2, group_m=2, subtile=True)]
    return [
        # 16-bit inputs. Measured on an H200 (bf16, 4096^3 .. 16384x28672x8192): 128x256x64 with 8 warps
        # and 3 stages is within 5% of cuBLAS everywhere; 128x128 with 4 warps wins some mid sizes.
        # Warp specialization (Hopper) and flatten=False measured no better: left out.
        _cfg(128, 256, 64, 8, 3),
        _cfg(128, 256, 64, 8, 3, subtile=True),
        _cfg(128, 256, 64, 8, 4, subtile=True),
        _cfg(128, 128, 64, 4, 4),
        # The bias+GELU epilogue at 2048^3 (H100): 0.76x of the plain kernel against 0.53x with 128x256.
        _cfg(128, 128, 64, 8, 4, subtile=True),
        _cfg(64, 128, 64, 4, 4),
        _cfg(64, 64, 64, 4, 4),
        # fp32 inputs need a shallower K tile to fit the pipeline in shared memory.
        _cfg(128, 128, 32, 8, 3),
        _cfg(64, 128, 32, 4, 4),
    ]


def matmul_ptr_configs() -> list[triton.Config]:
    """Candidate configs of the pointer-based fallback kernel."""
    if INTERPRET:
        return [_cfg(32, 32, 16, 4, 2, group_m=2)]
    return [
        _cfg(128, 256, 64, 8, 3),
        _cfg(128, 128, 64, 8, 4),
        # Small 16-bit problems (see prefers_pointer), measured on an H100 under CUDA graphs: 64x32 ran
        # 512^3 at 0.98x cuBLAS, 64x128 1024^3 at 0.88x; 64x64x128 and 128x64 were close seconds. A later
        # sweep: 64x128x128 (3 stages) 1024^3 at 0.92x, 128x64x128 with 8 warps 0.87x.
        _cfg(128, 64, 64, 4, 4),
        _cfg(64, 128, 64, 4, 4),
        _cfg(64, 128, 128, 4, 3),
        _cfg(128, 64, 128, 8, 3),
        _cfg(64, 64, 128, 4, 3),
        _cfg(64, 64, 64, 4, 4),
        _cfg(64, 32, 64, 4, 4),
        # fp32 inputs
        _cfg(128, 128, 32, 4, 4),
        _cfg(64, 128, 32, 4, 4),
        _cfg(64, 64, 32, 4, 4),
        _cfg(32, 64, 32, 4, 4),
    ]


def _smem_bytes(cfg: triton.Config, esize: int) -> int:
    kw = cfg.kwargs
    pipeline = (kw["BLOCK_M"] + kw["BLOCK_N"]) * kw["BLOCK_K"] * esize * cfg.num_stages
    epi_n = kw["BLOCK_N"] // 2 if kw["EPI_SUBTILE"] else kw["BLOCK_N"]
    return pipeline + kw["BLOCK_M"] * epi_n * esize


def prune_matmul_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Drop configs that overflow shared memory, don't suit the dtype, or whose tiles dwarf the problem."""
    if len(configs) <= 1:
        return configs
    a = named_args["a_ptr"]
    esize = a.element_size()
    m, n = named_args["M"], named_args["N"]
    kept = []
    for cfg in configs:
        kw = cfg.kwargs
        if _smem_bytes(cfg, esize) > _SMEM_LIMIT:
            continue
        # 16-bit operands: a K tile under 64 only lengthens the loop.
        if esize == 2 and kw["BLOCK_K"] < 64:
            continue
        if kw["BLOCK_M"] > max(64, triton.next_power_of_2(m)) or kw["BLOCK_N"] > max(64, triton.next_power_of_2(n)):
            continue
        kept.append(cfg)
    if not kept:  # keep the smallest tile that fits
        fitting = [c for c in configs if _smem_bytes(c, esize) <= _SMEM_LIMIT] or configs
        kept = [min(fitting, key=lambda c: c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"])]
    return kept


# ----------------------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------------------


@triton.jit
def _grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    # Consecutive tiles walk down GROUP_M row-tiles before moving right, so B panels are reused from L2.
    tiles_per_group = GROUP_M * num_pid_n
    group_id = tile_id // tiles_per_group
    first_m = group_id * GROUP_M
    group_size = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile_id % tiles_per_group) % group_size
    pid_n = (tile_id % tiles_per_group) // group_size
    return pid_m, pid_n


@triton.jit
def _bias_row(bias_ptr, off_n, N, WIDTH: tl.constexpr, HAS_BIAS: tl.constexpr):
    # The bias of columns off_n .. off_n + WIDTH as fp32 (0.0 without one).
    if HAS_BIAS:
        offs_n = off_n + tl.arange(0, WIDTH)
        return tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    else:
        return 0.0


@triton.jit
def _epilogue(acc, bias, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr, OUT_DTYPE: tl.constexpr):
    # Bias (a loaded fp32 row) and activation on the fp32 tile, in registers: returns (pre-activation, output).
    if HAS_BIAS:
        acc = acc + bias[None, :]
    return acc, activate(acc, ACTIVATION, OUT_DTYPE == tl.float32)


@triton.jit
def _finish_tile(
    c_desc,
    z_desc,
    acc,
    bias_ptr,
    off_m,
    off_n,
    N,
    dtype: tl.constexpr,
    WIDTH: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ACTIVATION: tl.constexpr,
    STORE_PRE: tl.constexpr,
):
    # The bias is loaded here, after the K loop, one half-tile at a time: loaded earlier (as the pointer
    # kernel does) it is held in the accumulator's layout and the large tiles spill (ptxas, sm_90).
    bias = _bias_row(bias_ptr, off_n, N, WIDTH, HAS_BIAS)
    pre, out = _epilogue(acc, bias, HAS_BIAS, ACTIVATION, dtype)
    if STORE_PRE:
        z_desc.store([off_m, off_n], pre.to(dtype))
    c_desc.store([off_m, off_n], out.to(dtype))


@triton.jit
def tma_epilogue(
    c_desc,
    z_desc,
    acc,
    bias_ptr,
    off_m,
    off_n,
    N,
    dtype: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    EPI_SUBTILE: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ACTIVATION: tl.constexpr,
    STORE_PRE: tl.constexpr,
):
    """Epilogue and TMA stores of an fp32 tile: whole, or (EPI_SUBTILE) as two half-width tiles, each taken
    through bias, activation and its stores in turn, so that the epilogue holds half the registers."""
    if EPI_SUBTILE:
        acc = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        acc0, acc1 = tl.split(acc)
        _finish_tile(c_desc, z_desc, acc0, bias_ptr, off_m, off_n, N, dtype, BLOCK_N // 2, HAS_BIAS, ACTIVATION,
                     STORE_PRE)  # fmt: skip
        _finish_tile(c_desc, z_desc, acc1, bias_ptr, off_m, off_n + BLOCK_N // 2, N, dtype, BLOCK_N // 2, HAS_BIAS,
                     ACTIVATION, STORE_PRE)  # fmt: skip
    else:
        _finish_tile(c_desc, z_desc, acc, bias_ptr, off_m, off_n, N, dtype, BLOCK_N, HAS_BIAS, ACTIVATION, STORE_PRE)


@triton.jit
def _matmul_tma_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    z_ptr,
    bias_ptr,
    M,
    N,
    K,
    stride_a,
    stride_b,
    stride_cm,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EPI_SUBTILE: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
    FLATTEN: tl.constexpr,
    NUM_SMS: tl.constexpr,
    A_COL_MAJOR: tl.constexpr,
    B_COL_MAJOR: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ACTIVATION: tl.constexpr,
    STORE_PRE: tl.constexpr,
    UPCAST: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
):
    dtype = c_ptr.dtype.element_ty
    # A column-major operand is described as its row-major transpose (the storage it is a view of) and its
    # tiles are transposed after the load: a view in registers, a K-major operand for the dot.
    if A_COL_MAJOR:
        a_desc = tl.make_tensor_descriptor(a_ptr, [K, M], [stride_a, 1], [BLOCK_K, BLOCK_M])
    else:
        a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [stride_a, 1], [BLOCK_M, BLOCK_K])
    if B_COL_MAJOR:
        b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [stride_b, 1], [BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [stride_b, 1], [BLOCK_K, BLOCK_N])
    if EPI_SUBTILE:
        c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [stride_cm, 1], [BLOCK_M, BLOCK_N // 2])
    else:
        c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [stride_cm, 1], [BLOCK_M, BLOCK_N])
    z_desc = c_desc  # stands in, unused, unless the pre-activation is stored for the backward
    if STORE_PRE:
        if EPI_SUBTILE:
            z_desc = tl.make_tensor_descriptor(z_ptr, [M, N], [stride_cm, 1], [BLOCK_M, BLOCK_N // 2])
        else:
            z_desc = tl.make_tensor_descriptor(z_ptr, [M, N], [stride_cm, 1], [BLOCK_M, BLOCK_N])

    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)

    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            off_k = ki * BLOCK_K
            if A_COL_MAJOR:
                a = a_desc.load([off_k, off_m]).T
            else:
                a = a_desc.load([off_m, off_k])
            if B_COL_MAJOR:
                b = b_desc.load([off_n, off_k]).T
            else:
                b = b_desc.load([off_k, off_n])
            if UPCAST:  # interpreter only: its bf16 dot is wrong
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)

        tma_epilogue(c_desc, z_desc, acc, bias_ptr, off_m, off_n, N, dtype, BLOCK_M, BLOCK_N, EPI_SUBTILE, HAS_BIAS,
                     ACTIVATION, STORE_PRE)  # fmt: skip


@triton.jit
def _matmul_ptr_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    z_ptr,
    bias_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EPI_SUBTILE: tl.constexpr,  # unused here; shares the config schema of the TMA kernel
    WARP_SPECIALIZE: tl.constexpr,
    FLATTEN: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ACTIVATION: tl.constexpr,
    STORE_PRE: tl.constexpr,
    UPCAST: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
):
    dtype = c_ptr.dtype.element_ty
    pid_m, pid_n = _grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Rows/cols past the edge wrap onto valid ones: loads stay unmasked in M and N, the store is masked.
    rows = (offs_m % M).to(tl.int64)
    cols = (offs_n % N).to(tl.int64)
    a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + cols[None, :] * stride_bn
    # The bias is loaded before the K loop, its latency hidden under it rather than stalling the epilogue
    # (this kernel's tiles are small: the registers it holds through the loop are few).
    bias = _bias_row(bias_ptr, pid_n * BLOCK_N, N, BLOCK_N, HAS_BIAS)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(tl.cdiv(K, BLOCK_K)):
        k_left = K - ki * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if UPCAST:  # interpreter only: its bf16 dot is wrong
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    pre, out = _epilogue(acc, bias, HAS_BIAS, ACTIVATION, dtype)
    if STORE_PRE:
        z_ptrs = z_ptr + offs_m.to(tl.int64)[:, None] * stride_cm + offs_n.to(tl.int64)[None, :] * stride_cn
        tl.store(z_ptrs, pre.to(dtype), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
    c_ptrs = c_ptr + offs_m.to(tl.int64)[:, None] * stride_cm + offs_n.to(tl.int64)[None, :] * stride_cn
    tl.store(c_ptrs, out.to(dtype), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# Layouts and epilogue are constexprs: each combination is tuned (and compiled) apart.
_matmul_tma_tuned = triton.autotune(
    configs=matmul_tma_configs(),
    key=["M", "N", "K", "A_COL_MAJOR", "B_COL_MAJOR", "HAS_BIAS", "ACTIVATION", "STORE_PRE"],
    prune_configs_by={"early_config_prune": prune_matmul_configs},
)(_matmul_tma_kernel)

_matmul_ptr_tuned = triton.autotune(
    configs=matmul_ptr_configs(),
    key=["M", "N", "K", "HAS_BIAS", "ACTIVATION", "STORE_PRE"],
    prune_configs_by={"early_config_prune": prune_matmul_configs},
)(_matmul_ptr_kernel)


# ----------------------------------------------------------------------------------------------------------
# Launcher
# ----------------------------------------------------------------------------------------------------------


def tma_layout(t: torch.Tensor) -> str | None:
    """How a TMA descriptor can read 2-D `t`: "row" (unit column stride), "col" (unit row stride, e.g. the
    transpose of a contiguous tensor), or None (no unit stride, a stride not a positive multiple of 16 bytes,
    or a base not 16-byte aligned)."""
    if t.data_ptr() % 16:
        return None
    esize = t.element_size()
    for layout, inner, outer in (("row", 1, 0), ("col", 0, 1)):
        if t.stride(inner) == 1 and t.stride(outer) > 0 and (t.stride(outer) * esize) % 16 == 0:
            return layout
    return None


def _tma_supported(a: torch.Tensor, b: torch.Tensor, c_stride_bytes: int) -> bool:
    if not INTERPRET and not has_tma(a.device):
        return False
    return tma_layout(a) is not None and tma_layout(b) is not None and c_stride_bytes % 16 == 0


# A 16-bit product no side of which exceeds this goes to the pointer kernel: there the persistent TMA
# kernel's fixed cost (descriptors made on the device, the tile loop) outweighs what TMA saves. H100, bf16,
# CUDA graphs, best tile of each: 512^3 0.98x cuBLAS against 0.58x, 1024^3 0.88x against 0.66x; 1536^3
# level (0.59x, 0.61x); 2048^3 the TMA kernel's (0.92x against 0.82x). Skinny shapes were not measured.
SMALL_SIDE = 1024


def prefers_pointer(m: int, n: int, k: int, element_size: int, interpret: bool = INTERPRET) -> bool:
    """Whether a product TMA could read runs faster through the pointer kernel: 16-bit, every side small.
    Under the interpreter never: its small test shapes keep exercising the TMA kernel (tests also force
    each path)."""
    return not interpret and element_size == 2 and max(m, n, k) <= SMALL_SIDE


def ws_unsupported(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> str | None:
    """Why the warp-specialised Gluon kernel (`_matmul_hopper_ws`) cannot take this product, or None."""
    if not is_hopper(a.device):
        return "needs an sm_90 (Hopper) GPU: the Gluon kernel has no interpreter"
    if a.dtype not in HALF_DTYPES:
        return f"takes float16 or bfloat16 inputs, got {a.dtype}"
    if tma_layout(a) is None or tma_layout(b) is None or tma_layout(c) != "row":
        return f"needs operands TMA can read, got strides {a.stride()}, {b.stride()} and {c.stride()}"
    if 0 in a.shape:
        return "needs K > 0"
    return None


def _check_matmul(a: torch.Tensor, b: torch.Tensor, fn: str = "matmul") -> None:
    check_tensor(fn, "a", a, dtypes=FLOAT_DTYPES, ndim=2, ndim_hint="(M, K)")
    check_tensor(fn, "b", b, dtypes=FLOAT_DTYPES, ndim=2, ndim_hint="(K, N)")
    if a.dtype != b.dtype:
        raise TypeError(f"{fn}: b must have the dtype of a ({a.dtype}), got {b.dtype}")
    check_same_device(fn, a=a, b=b)
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"{fn}: b must have shape (K, N) with K = a.shape[1] = {a.shape[1]}, got shape {tuple(b.shape)}"
        )


def launch_matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    *,
    z: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    activation: int = activations.NONE,
    path: str | None = None,
    config: triton.Config | None = None,
    family: str = "matmul",
    kind: str = "",
) -> None:
    """c = activation(a @ b + bias), and z = a @ b + bias when z is given; no validation.

    c (and z) are (M, N) with a unit column stride. `path` forces "tma", "ptr" or "ws" (the warp-specialised
    Gluon kernel for Hopper, one fixed config; `ws_unsupported` says which products it takes); `config`
    bypasses the autotuner; `family` and `kind` name the launch for `last_launch` (kind is appended to the
    path).
    """
    M, K = a.shape
    N = b.shape[1]
    if M == 0 or N == 0:
        return
    plain = z is None and bias is None and activation == activations.NONE
    if K == 0 and plain:
        c.zero_()
        return
    if path is None:
        # An empty K goes to the pointer kernel: a TMA descriptor cannot have an empty dim.
        tma = K > 0 and _tma_supported(a, b, c.stride(0) * c.element_size())
        path = "tma" if tma and not prefers_pointer(M, N, K, a.element_size()) else "ptr"
    precision = "tf32" if a.dtype == torch.float32 and torch.get_float32_matmul_precision() != "highest" else "ieee"
    flags = {
        "HAS_BIAS": bias is not None,
        "ACTIVATION": activation,
        "STORE_PRE": z is not None,
        "UPCAST": INTERPRET and a.dtype == torch.bfloat16,
        "INPUT_PRECISION": precision,
    }
    if path == "tma":
        a_layout, b_layout = tma_layout(a), tma_layout(b)
        if a_layout is None or b_layout is None:
            raise ValueError(
                f"matmul: path 'tma' needs operands TMA can read, got strides {a.stride()} and {b.stride()}"
            )
        ensure_allocator()
        sms = num_sms(a.device)

        def grid(meta):
            return (min(sms, triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])),)

        a_col, b_col = a_layout == "col", b_layout == "col"
        flags.update(NUM_SMS=sms, A_COL_MAJOR=a_col, B_COL_MAJOR=b_col)
        stride_a, stride_b = a.stride(1 if a_col else 0), b.stride(1 if b_col else 0)
        args = (a, b, c, z, bias, M, N, K, stride_a, stride_b, c.stride(0))
        if config is None:
            _matmul_tma_tuned[grid](*args, **flags)
            config = _matmul_tma_tuned.best_config
        else:
            _matmul_tma_kernel[grid(config.kwargs)](*args, **flags, **config.all_kwargs())
    elif path == "ws":
        # Imported here: the Gluon module takes this one's jit helpers.
        from . import _matmul_hopper_ws as ws

        reason = ws_unsupported(a, b, c)
        if reason:
            raise ValueError(f"matmul: path 'ws' {reason}")
        ws.launch(a, b, c, z, bias, activation, tma_layout(a) == "col", tma_layout(b) == "col")
        config = ws.launch_config()
    elif path == "ptr":

        def grid(meta):
            return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

        args = (a, b, c, z, bias, M, N, K, *a.stride(), *b.stride(), *c.stride())
        if config is None:
            _matmul_ptr_tuned[grid](*args, **flags)
            config = _matmul_ptr_tuned.best_config
        else:
            _matmul_ptr_kernel[grid(config.kwargs)](*args, **flags, **config.all_kwargs())
    else:
        raise ValueError(f"matmul: path must be 'tma', 'ws', 'ptr' or None, got {path!r}")
    note_launch(family, config, f"{path} {kind}" if kind else path)


def _matmul_forward(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    path: str | None = None,
    config: triton.Config | None = None,
    family: str = "matmul",
    kind: str = "",
) -> torch.Tensor:
    """a @ b without validation. `path` forces "tma", "ws" or "ptr"; `config` bypasses the autotuner."""
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    launch_matmul(a, b, c, path=path, config=config, family=family, kind=kind)
    return c


def matmul_input_grads(
    dc: torch.Tensor, a: torch.Tensor | None, b: torch.Tensor | None, need_a: bool, need_b: bool
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """dA = dC B^T and dB = A^T dC, each only if needed, by the forward kernels reading transposed views."""
    with on_device(dc):
        da = _matmul_forward(dc, b.T, family="matmul-bwd", kind="dA") if need_a else None
        db = _matmul_forward(a.T, dc, family="matmul-bwd", kind="dB") if need_b else None
    return da, db


class _Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        need_a, need_b = ctx.needs_input_grad
        # Each gradient keeps only what it reads: dA needs b, dB needs a.
        ctx.save_for_backward(a if need_b else None, b if need_a else None)
        return _matmul_forward(a, b)

    @staticmethod
    @once_differentiable
    def backward(ctx, dc: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        a, b = ctx.saved_tensors
        return matmul_input_grads(dc, a, b, *ctx.needs_input_grad)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return a @ b for 2-D a (M, K) and b (K, N) of one dtype (fp16, bf16, fp32); fp32 accumulation.

    Either operand may be row-major or column-major (a transposed view) on the TMA path; any strides on the
    pointer path. Differentiable: with grad enabled and an input requiring grad, the backward computes
    dA = dC B^T and dB = A^T dC with the same kernels reading transposed views (no copies), saving only the
    operand each gradient reads; otherwise nothing is saved and no autograd node is made.
    """
    _check_matmul(a, b)
    with on_device(a):
        if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
            return _Matmul.apply(a, b)
        return _matmul_forward(a, b)


# What tierbench.kernels exports of this module.
EXPORTS = {
    "matmul": Export(FLOAT_DTYPES, "matmul"),
}
