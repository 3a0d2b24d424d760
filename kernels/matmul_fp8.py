"""FP8 matrix product: out = (a * scale_a) @ (b * scale_b), fp32 accumulation, a 16- or 32-bit output.

Operands: torch.float8_e4m3fn (or float8_e5m2), both of one dtype, in the layouts Hopper's FP8 wgmma reads
without a transpose, both K-major (the layouts torch._scaled_mm takes):
- a (M, K), row-major: a unit column stride, the row stride a multiple of 16 elements;
- b (K, N), column-major: b = bt.T for a row-major bt of shape (N, K), its column stride a multiple of 16;
- both bases 16-byte aligned, and N a multiple of 8 (16-bit output) or 4 (float32 output), so that TMA can
  write the output's rows. Other layouts get a ValueError saying which of these is not met; M, N and K
  are otherwise free (ragged tiles are zero-filled on load and clipped on store).

Scaling recipe: scales are float32 dequantisation factors, real value = fp8 value * scale. Per tensor (a
one-element tensor: shape (), (1,) or (1, 1)), or per row of a, shape (M, 1), and per column of b, shape
(1, N), chosen independently for a and b. A caller quantises with, e.g., scale = amax / 448 (e4m3's
largest finite value; 57344 for e5m2) over the tensor, row or column and a_fp8 = (a / scale).to(dtype).
Since a row's and a column's scale factor out of each dot product, the kernel multiplies the fp32
accumulator tile by scale_a (rows) and scale_b (columns) in registers before the one store.

Accumulation: fp32. On Hopper, wgmma adds FP8 products in a narrower accumulator; by default the kernel
moves that partial sum into its fp32 accumulator after every BLOCK_K (128) of K (`max_num_imprecise_acc`),
and `fast_accum=True` leaves the whole K to the tensor cores' accumulation (faster, less precise), as
torch._scaled_mm's `use_fast_accum` does. Under Triton's interpreter, which has no FP8 dot, tiles are widened
to fp32 and multiplied exactly (the products of two fp8 values are exact in fp32).

Kernel: `_matmul_fp8_kernel`, the persistent TMA design of `matmul._matmul_tma_kernel` (one or two programs
per SM, grouped tile order, pipelined K loop, optional half-width epilogue stores); Hopper (sm_90) or newer
only. `path="gluon"` forces `_matmul_fp8_hopper` (Gluon, sm_90), whose precise accumulation adds each K
step's products while the next step's run, where this kernel waits for them.
Forward only (no autograd). Family "matmul-fp8" in `last_launch`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import (
    INTERPRET,
    Export,
    check_same_device,
    check_tensor,
    ensure_allocator,
    is_hopper,
    note_launch,
    num_sms,
    on_device,
)
from .matmul import _SMEM_LIMIT, _cfg, _grouped_tile, tma_epilogue

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)

# ----------------------------------------------------------------------------------------------------------
# Configs
# ----------------------------------------------------------------------------------------------------------


def fp8_cfg(bm, bn, bk, warps, stages, *, group_m=8, subtile=False, per_sm=1, split_n=False) -> triton.Config:
    """A config of the 16-bit kernel's form with PER_SM programs an SM (the grid: PER_SM x SMs); SPLIT_N:
    precise accumulation in two half-width products a K step (see the kernel)."""
    base = _cfg(bm, bn, bk, warps, stages, group_m=group_m, subtile=subtile)
    kwargs = {**base.kwargs, "PER_SM": per_sm, "SPLIT_N": split_n}
    return triton.Config(kwargs, num_warps=warps, num_stages=stages)


def matmul_fp8_configs() -> list[triton.Config]:
    """Candidate configs (BLOCK_K 128: four K-steps of 32 of FP8 wgmma); one small config under the interpreter.

    The tiles of the 16-bit kernel with K tiles twice as deep (same bytes a stage), 256x128 (the largest
    tile precise accumulation compiles without spilling) and 128x128 twice an SM. On an H100 at 4096^3 and
    8192^3 (docs/performance.md): 256x128 and 128x128 twice an SM take precise accumulation from 0.64x to
    0.77-0.82x torch._scaled_mm; fast accumulation reaches 0.97-1.00x (the autotuner picking 128x256, 4 stages).
    """
    if INTERPRET:
        return [fp8_cfg(32, 32, 32, 4, 2, group_m=2, subtile=True, per_sm=2)]
    return [
        fp8_cfg(128, 256, 128, 8, 3),
        fp8_cfg(128, 256, 128, 8, 3, subtile=True),
        fp8_cfg(128, 256, 128, 8, 4, subtile=True),
        fp8_cfg(256, 128, 128, 8, 3),
        fp8_cfg(128, 128, 128, 8, 4),
        fp8_cfg(128, 128, 128, 4, 4),
        fp8_cfg(64, 128, 128, 4, 4),
        fp8_cfg(64, 64, 128, 4, 4),
        fp8_cfg(256, 128, 128, 8, 4, subtile=True),
        # Two programs an SM (one warpgroup each): precise accumulation waits for each K step's MMAs before
        # adding them up, and the other program's MMAs can run meanwhile. (64x128 and 128x64 twice an SM
        # measured 0.50-0.63x torch._scaled_mm: left out.)
        fp8_cfg(128, 128, 128, 4, 3, subtile=True, per_sm=2),
    ]


# Shared memory of one SM on sm_90, and what the hardware keeps of it for each resident program.
_SM_SMEM = 233472
_SMEM_PER_PROGRAM_RESERVED = 1024


def _smem_bytes(cfg: triton.Config, out_esize: int) -> int:
    kw = cfg.kwargs
    pipeline = (kw["BLOCK_M"] + kw["BLOCK_N"]) * kw["BLOCK_K"] * cfg.num_stages  # one byte an operand element
    epi_n = kw["BLOCK_N"] // 2 if kw["EPI_SUBTILE"] or kw.get("SPLIT_N", False) else kw["BLOCK_N"]
    return pipeline + kw["BLOCK_M"] * epi_n * out_esize


# Precise accumulation keeps a second fp32 accumulator for the tensor cores' partial sums: in sm_90 compiles
# the 128x256 tiles spilled with it (255 registers, 288 bytes), 256x128 did not (255, none).
_MAX_PRECISE_BLOCK_N = 128


def prune_fp8_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Drop configs that overflow shared memory (a program's, or an SM's for the programs it should hold),
    spill with precise accumulation, or whose tiles dwarf the problem (keeping at least one)."""
    if len(configs) <= 1:
        return configs
    out_esize = named_args["c_ptr"].element_size()
    m, n = named_args["M"], named_args["N"]

    def fits(c: triton.Config) -> bool:
        smem = _smem_bytes(c, out_esize)
        per_sm = c.kwargs.get("PER_SM", 1)
        return smem <= _SMEM_LIMIT and per_sm * (smem + _SMEM_PER_PROGRAM_RESERVED) <= _SM_SMEM

    fitting = [c for c in configs if fits(c)] or configs
    if kwargs.get("FAST_ACCUM", False):  # the split products are precise accumulation's form
        fitting = [c for c in fitting if not c.kwargs.get("SPLIT_N", False)] or fitting
    else:
        fitting = [
            c for c in fitting if c.kwargs["BLOCK_N"] <= _MAX_PRECISE_BLOCK_N or c.kwargs.get("SPLIT_N", False)
        ] or fitting
    kept = [
        c
        for c in fitting
        if c.kwargs["BLOCK_M"] <= max(64, triton.next_power_of_2(m))
        and c.kwargs["BLOCK_N"] <= max(64, triton.next_power_of_2(n))
    ]
    return kept or [min(fitting, key=lambda c: c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"])]


# ----------------------------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------------------------


@triton.jit
def _step_product(a, b, UPCAST: tl.constexpr):
    # One K step's product on its own: the tensor cores accumulate its BLOCK_K (precise accumulation's
    # promotion interval), and the caller adds it to its fp32 accumulator.
    if UPCAST:  # interpreter only: no FP8 dot; products of fp8 values are exact in fp32
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    else:
        return tl.dot(a, b)


@triton.jit
def _scaled(acc, off_m, off_n, M, N, scale, scale_a_ptr, scale_b_ptr, stride_sa, stride_sb, BLOCK_M: tl.constexpr,
            WIDTH: tl.constexpr, ROW_SCALES: tl.constexpr, COL_SCALES: tl.constexpr):  # fmt: skip
    # The fp32 tile (BLOCK_M x WIDTH at off_m, off_n) times its rows' and columns' scales and the scalar ones.
    if ROW_SCALES:
        offs_m = off_m + tl.arange(0, BLOCK_M)
        acc = acc * tl.load(scale_a_ptr + offs_m * stride_sa, mask=offs_m < M, other=0.0)[:, None]
    if COL_SCALES:
        offs_n = off_n + tl.arange(0, WIDTH)
        acc = acc * tl.load(scale_b_ptr + offs_n * stride_sb, mask=offs_n < N, other=0.0)[None, :]
    return acc * scale


@triton.jit
def _matmul_fp8_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    scale_a_ptr,
    scale_b_ptr,
    M,
    N,
    K,
    stride_am,
    stride_bn,
    stride_cm,
    stride_sa,
    stride_sb,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EPI_SUBTILE: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
    FLATTEN: tl.constexpr,
    NUM_SMS: tl.constexpr,
    ROW_SCALES: tl.constexpr,
    COL_SCALES: tl.constexpr,
    FAST_ACCUM: tl.constexpr,
    UPCAST: tl.constexpr,
    PER_SM: tl.constexpr = 1,  # programs per SM
    # Precise accumulation as two half-width products a K step, each added to its half of the fp32 tile:
    # the first half's adds can run beside the second half's MMAs, and the tile holds no second full-size
    # accumulator (128x256 compiles without spilling).
    SPLIT_N: tl.constexpr = False,
):
    dtype = c_ptr.dtype.element_ty
    HALF_N: tl.constexpr = BLOCK_N // 2
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [stride_am, 1], [BLOCK_M, BLOCK_K])
    # b (K, N) column-major is bt (N, K) row-major: described as bt, its tiles transposed in registers.
    if SPLIT_N:
        b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [stride_bn, 1], [HALF_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [stride_bn, 1], [BLOCK_N, BLOCK_K])
    if EPI_SUBTILE or SPLIT_N:
        c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [stride_cm, 1], [BLOCK_M, BLOCK_N // 2])
    else:
        c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [stride_cm, 1], [BLOCK_M, BLOCK_N])
    scale = 1.0
    if not ROW_SCALES:
        scale = scale * tl.load(scale_a_ptr)
    if not COL_SCALES:
        scale = scale * tl.load(scale_b_ptr)

    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)

    programs = NUM_SMS * PER_SM
    for tile_id in tl.range(tl.program_id(0), num_tiles, programs, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        if SPLIT_N:
            acc0 = tl.zeros((BLOCK_M, HALF_N), dtype=tl.float32)
            acc1 = tl.zeros((BLOCK_M, HALF_N), dtype=tl.float32)
            for ki in range(k_tiles):
                off_k = ki * BLOCK_K
                a = a_desc.load([off_m, off_k])
                part0 = _step_product(a, b_desc.load([off_n, off_k]).T, UPCAST)
                part1 = _step_product(a, b_desc.load([off_n + HALF_N, off_k]).T, UPCAST)
                acc0 += part0
                acc1 += part1
            acc0 = _scaled(acc0, off_m, off_n, M, N, scale, scale_a_ptr, scale_b_ptr, stride_sa, stride_sb, BLOCK_M,
                           HALF_N, ROW_SCALES, COL_SCALES)  # fmt: skip
            acc1 = _scaled(acc1, off_m, off_n + HALF_N, M, N, scale, scale_a_ptr, scale_b_ptr, stride_sa, stride_sb,
                           BLOCK_M, HALF_N, ROW_SCALES, COL_SCALES)  # fmt: skip
            tma_epilogue(c_desc, c_desc, acc0, None, off_m, off_n, N, dtype, BLOCK_M, HALF_N, False, False, 0, False)
            tma_epilogue(c_desc, c_desc, acc1, None, off_m, off_n + HALF_N, N, dtype, BLOCK_M, HALF_N, False, False, 0,
                         False)  # fmt: skip
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for ki in range(k_tiles):
                off_k = ki * BLOCK_K
                a = a_desc.load([off_m, off_k])
                b = b_desc.load([off_n, off_k]).T
                if UPCAST:  # interpreter only: no FP8 dot; products of fp8 values are exact in fp32
                    acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
                elif FAST_ACCUM:
                    acc = tl.dot(a, b, acc)
                else:
                    acc = tl.dot(a, b, acc, max_num_imprecise_acc=BLOCK_K)
            acc = _scaled(acc, off_m, off_n, M, N, scale, scale_a_ptr, scale_b_ptr, stride_sa, stride_sb, BLOCK_M,
                          BLOCK_N, ROW_SCALES, COL_SCALES)  # fmt: skip
            tma_epilogue(c_desc, c_desc, acc, None, off_m, off_n, N, dtype, BLOCK_M, BLOCK_N, EPI_SUBTILE, False, 0,
                         False)  # fmt: skip


_matmul_fp8_tuned = triton.autotune(
    configs=matmul_fp8_configs(),
    key=["M", "N", "K", "ROW_SCALES", "COL_SCALES", "FAST_ACCUM"],
    prune_configs_by={"early_config_prune": prune_fp8_configs},
)(_matmul_fp8_kernel)


# ----------------------------------------------------------------------------------------------------------
# Validation and launcher
# ----------------------------------------------------------------------------------------------------------

_FN = "matmul_fp8"


def _check_scale(name: str, s: object, per_shape: tuple[int, int], per_what: str) -> bool:
    """Validate a scale; True if it is per row / per column, False if per tensor."""
    check_tensor(_FN, name, s, dtypes=(torch.float32,))
    if s.numel() == 1 and s.dim() <= 2:
        return False
    if tuple(s.shape) == per_shape:
        return True
    raise ValueError(
        f"{_FN}: {name} must be a float32 tensor of one element (per tensor) or of shape {per_shape} "
        f"(per {per_what}), got shape {tuple(s.shape)}"
    )


def _check_layouts(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype) -> None:
    if a.stride(1) != 1:
        raise ValueError(f"{_FN}: a must be row-major (M, K) with a unit column stride, got strides {a.stride()}")
    if b.stride(0) != 1:
        raise ValueError(
            f"{_FN}: b must be K-major: (K, N) with column-major storage, b = bt.T for a contiguous bt of shape "
            f"(N, K) (the layout torch._scaled_mm takes), got strides {b.stride()}"
        )
    for name, stride in (("a's row stride", a.stride(0)), ("b's column stride", b.stride(1))):
        if stride <= 0 or stride % 16:
            raise ValueError(f"{_FN}: {name} must be a positive multiple of 16 elements (TMA), got {stride}")
    for name, t in (("a", a), ("b", b)):
        if t.data_ptr() % 16:
            offset = t.data_ptr() % 16
            raise ValueError(f"{_FN}: {name} must start at a 16-byte aligned address (TMA), got offset {offset}")
    per_row = 16 // out_dtype.itemsize
    n = b.shape[1]
    if n % per_row:
        raise ValueError(
            f"{_FN}: N = b.shape[1] must be a multiple of {per_row} for a {out_dtype} output "
            f"(16-byte output rows for TMA), got {n}"
        )
    if not INTERPRET:
        cap = torch.cuda.get_device_capability(a.device)
        if cap < (9, 0):
            raise ValueError(
                f"{_FN}: needs a GPU of compute capability 9.0 or newer (TMA, FP8 wgmma), got {cap[0]}.{cap[1]} "
                f"on {a.device}"
            )


def _matmul_fp8_forward(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    out_dtype: torch.dtype,
    fast_accum: bool = False,
    *,
    config: triton.Config | None = None,
    path: str | None = None,
) -> torch.Tensor:
    """Launch without validation; `config` bypasses the autotuner; `path="gluon"` takes the Gluon kernel."""
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=out_dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    if path == "gluon":
        # Imported here: the Gluon module takes matmul's jit helpers.
        from . import _matmul_fp8_hopper as gluon_fp8

        gluon_fp8.launch(a, b, c, scale_a, scale_b, fast_accum)
        note_launch("matmul-fp8", gluon_fp8.launch_config(), "gluon fast-accum" if fast_accum else "gluon")
        return c
    ensure_allocator()
    sms = num_sms(a.device)
    row_scales = scale_a.numel() > 1
    col_scales = scale_b.numel() > 1

    def grid(meta):
        programs = sms * meta.get("PER_SM", 1)
        return (min(programs, triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])),)

    args = (a, b, c, scale_a, scale_b, M, N, K, a.stride(0), b.stride(1), c.stride(0))
    args += (scale_a.stride(0) if row_scales else 0, scale_b.stride(1) if col_scales else 0)
    flags = {
        "NUM_SMS": sms,
        "ROW_SCALES": row_scales,
        "COL_SCALES": col_scales,
        "FAST_ACCUM": fast_accum,
        "UPCAST": INTERPRET,
    }
    if config is None:
        _matmul_fp8_tuned[grid](*args, **flags)
        config = _matmul_fp8_tuned.best_config
    else:
        _matmul_fp8_kernel[grid(config.kwargs)](*args, **flags, **config.all_kwargs())
    note_launch("matmul-fp8", config, "tma fast-accum" if fast_accum else "tma")
    return c


def matmul_fp8(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    out_dtype: torch.dtype = torch.bfloat16,
    *,
    fast_accum: bool = False,
    path: str | None = None,
) -> torch.Tensor:
    """(a * scale_a) @ (b * scale_b) as `out_dtype` (bf16, fp16 or fp32), fp32 accumulation.

    a: (M, K) row-major, b: (K, N) column-major (b = bt.T, bt (N, K) contiguous), both float8_e4m3fn or
    both float8_e5m2. scale_a: float32, one element or (M, 1); scale_b: float32, one element or (1, N).
    See the module docstring for the alignment rules, the scaling recipe and `fast_accum`. `path` forces
    "triton" (the default, `_matmul_fp8_kernel`) or "gluon" (`_matmul_fp8_hopper`: precise accumulation's
    adds beside the next products; sm_90 only, no interpreter; not yet measured on a GPU, so never chosen
    by default).
    """
    check_tensor(_FN, "a", a, dtypes=FP8_DTYPES, ndim=2, ndim_hint="(M, K)")
    check_tensor(_FN, "b", b, dtypes=FP8_DTYPES, ndim=2, ndim_hint="(K, N)")
    if a.dtype != b.dtype:
        raise TypeError(f"{_FN}: b must have the dtype of a ({a.dtype}), got {b.dtype}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"{_FN}: b must have shape (K, N) with K = a.shape[1] = {a.shape[1]}, got shape {tuple(b.shape)}"
        )
    M, N = a.shape[0], b.shape[1]
    _check_scale("scale_a", scale_a, (M, 1), "row of a")
    _check_scale("scale_b", scale_b, (1, N), "column of b")
    check_same_device(_FN, a=a, b=b, scale_a=scale_a, scale_b=scale_b)
    if out_dtype not in OUT_DTYPES:
        raise TypeError(f"{_FN}: out_dtype must be one of (bfloat16, float16, float32), got {out_dtype}")
    if not isinstance(fast_accum, bool):
        raise TypeError(f"{_FN}: fast_accum must be a bool, got {type(fast_accum).__name__}")
    if path not in (None, "triton", "gluon"):
        raise ValueError(f"{_FN}: path must be 'triton', 'gluon' or None, got {path!r}")
    if path == "gluon" and not is_hopper(a.device):
        raise ValueError(f"{_FN}: path 'gluon' needs an sm_90 (Hopper) GPU: the Gluon kernel has no interpreter")
    if a.numel() > 0 and b.numel() > 0:
        _check_layouts(a, b, out_dtype)
    with on_device(a):
        return _matmul_fp8_forward(a, b, scale_a, scale_b, out_dtype, fast_accum, path=path)


# What tierbench.kernels exports of this module.
EXPORTS = {
    "matmul_fp8": Export(FP8_DTYPES, "matmul-fp8", ((9, 0), "TMA and FP8 wgmma")),
}
