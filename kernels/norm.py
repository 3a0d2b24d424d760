"""Row normalizations over the last dim: layer_norm, rms_norm, and the fused bias + GELU + LayerNorm.

All three share one kernel, `_norm_kernel`, specialised by constexpr flags, with two kinds of programs that
the autotuner chooses between per (width, op, band of rows per SM):
- whole rows (CHUNK = 0): ROWS rows per program, each whole row held in registers (hidden <= 16384), so x is
  read once and y written once. Persistent variants (CTAS > 0) walk several rows per program and prefetch
  the next row into registers, which is what keeps 16384-wide rows (one block per SM) moving.
- two passes (CHUNK > 0): one row per program in CHUNK-wide pieces, for rows of 8192 and wider: the first
  loop sums while keeping the row in L2, the second re-reads it from there to normalise it. Small
  programs, four per SM: at 16384 this beats holding the row in registers for RMSNorm.
Statistics are fp32. LayerNorm's moments are sums of deviations from the row's first value, both taken in
one reduction; that shift keeps E[d^2] - E[d]^2 from cancelling unless the first value sits thousands of
standard deviations from the mean. The fused GELU is exact-erf GELU to within 3.6e-6 (7.8e-7 for
float32) in ~10 instructions per element (`_norm_math`); `GELU_IMPL=0` keeps libdevice's erff as the
reference variant.

The three functions are differentiable. Where an input requires grad (and grad mode is on) they run
through `_NormFunction`: the same kernel with STORE_STATS on also stores each row's fp32 rstd (and mean,
LayerNorm), and the backward (`norm_backward`) starts from those. Otherwise the forward stores and saves
nothing, and its kernels are the same builds as without a backward.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from ._common import (
    FLOAT_DTYPES,
    INTERPRET,
    Export,
    check_eps,
    check_same_device,
    check_tensor,
    next_pow2,
    note_launch,
    num_sms,
    on_device,
)
from ._norm_math import _gelu_erf, _sum_pair, _to_f32
from ._tuning import ROWS_PER_SM_BANDS, TurnTuner, rows_per_sm_band
from .norm_backward import norm_backward

# ----------------------------------------------------------------------------------------------------------
# Configs
# ----------------------------------------------------------------------------------------------------------

# Widest row (elements, a power of two) held whole in registers; wider rows take the two-pass programs.
MAX_FUSED_BLOCK = 16384

# Narrowest row (next power of two) offered the two-pass programs: narrower rows take few registers per
# thread, so whole-row programs already fill an SM (the two-pass ones were measured from 8192 up).
MIN_TWO_PASS_BLOCK = 8192

# GELU inside the fused kernel: 0 = libdevice erff (the textbook form, kept as the reference variant),
# 1 = x * sigmoid(odd polynomial) fitted to the exact GELU (experiments/fit_gelu.py; fewer instructions).
GELU_IMPL = 1

# LayerNorm's moments are taken about each row's first value: var = E[d^2] - E[d]^2 loses about
# eps_fp32 * (1 + k^2) of itself when the mean sits k standard deviations from that value (an outlier
# channel at index 0), and the mean some of itself. Rows with k^2 > RECENTRE get both moments again about
# the mean found (the corrected two-pass algorithm: one more reduction, or one more pass from L2); ordinary
# data never does, and below that the loss stays under ~4e-6.
RECENTRE: tl.constexpr = tl.constexpr(64.0)

# Blocks per SM of the persistent whole-row programs (rows of 4096 or more, one row per step, the next row
# prefetched into registers). On the H200 1 and 2 measured alike at width 16384 and 2 was better below;
# a cp.async double buffer in shared memory (Triton's pipeliner) was 1.5-2x slower than either.
PERSISTENT_CTAS = 2


def norm_config(chunk: int = 0, rows: int = 1, ctas: int = 0, evict: int = 0, warps: int = 4) -> triton.Config:
    """One candidate: CHUNK 0 = whole rows (ROWS per program, CTAS blocks per SM if persistent), else two
    passes in CHUNK-wide pieces; EVICT 1 = with L2 eviction hints."""
    # num_stages=1: no loop of these programs gains from Triton's cp.async pipeliner (measured on the H200).
    return triton.Config({"CHUNK": chunk, "ROWS": rows, "CTAS": ctas, "EVICT": evict}, num_warps=warps, num_stages=1)


def norm_configs() -> list[triton.Config]:
    """Every candidate of `_norm_kernel`; `prune_norm_configs` keeps those that suit a width.

    Whole rows: rows per program x warps x (one program per tile | persistent) x L2 policy (EVICT 1: x
    streamed evict-first, the per-column vectors kept evict-last; it costs 3-7% at widths 8192-16384 on
    the H200 but gains 5% on the fused op at 16384x4096: a tuning choice).
    Two passes: chunk width x warps, with L2 policies (EVICT 1: the first pass keeps the row in L2,
    evict-last, for the second, which streams it out evict-first; on the H200 they were up to 7% slower
    without the hints, and plain stores instead of streaming ones gained nothing).
    """
    if INTERPRET:
        return [norm_config(rows=2)]
    whole_rows = [
        norm_config(rows=r, ctas=c, evict=e, warps=w)
        for r, c in [(1, 0), (2, 0), (4, 0), (8, 0), (1, PERSISTENT_CTAS)]
        for w in (1, 2, 4, 8, 16, 32)
        for e in (0, 1)
    ]
    two_pass = [norm_config(chunk=c, evict=1, warps=w) for c in (1024, 2048, 4096) for w in (4, 8, 16)]
    return whole_rows + two_pass


def prune_norm_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Keep the candidates that suit this width (BLOCK_N = next power of two of the hidden size):
    - whole rows only up to MAX_FUSED_BLOCK, with 8..32 elements of the tile per thread (16-byte loads, no
      register spills); several rows per program only for rows of 1024 or less; persistent programs and
      L2 policies only for rows of 4096 or more, where one row fills a block;
    - two passes only from MIN_TWO_PASS_BLOCK (required above MAX_FUSED_BLOCK), with at least two chunks
      per row and 4..16 elements of a chunk per thread (8- and 16-byte loads, small programs).
    """
    if len(configs) <= 1:
        return configs
    n_rows = named_args["n_rows"]
    block_n = kwargs["BLOCK_N"]
    kept = []
    for cfg in configs:
        chunk, rows = cfg.kwargs["CHUNK"], cfg.kwargs["ROWS"]
        threads = 32 * cfg.num_warps
        if chunk:
            if block_n >= MIN_TWO_PASS_BLOCK and 2 * chunk <= block_n and 4 <= chunk // threads <= 16:
                kept.append(cfg)
            continue
        if block_n > MAX_FUSED_BLOCK or not 8 <= rows * block_n // threads <= 32:
            continue
        if rows > 1 and (block_n > 1024 or rows > n_rows):
            continue
        if (cfg.kwargs["CTAS"] or cfg.kwargs["EVICT"]) and (block_n < 4096 or rows > 1):
            continue
        kept.append(cfg)
    if not kept:  # tiny rows: the smallest whole-row tile
        kept = [min((c for c in configs if not c.kwargs["CHUNK"]), key=lambda c: c.kwargs["ROWS"] * c.num_warps)]
    return kept


# ----------------------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------------------


@triton.jit
def _row_shift(first_raw, XB, HAS_GELU: tl.constexpr, GELU_IMPL: tl.constexpr, PRECISE: tl.constexpr,
               INLINE_PTX: tl.constexpr):  # fmt: skip
    # LayerNorm's moments are taken about the row's first value, GELU'd for the fused op (see RECENTRE).
    shift = first_raw.to(tl.float32)
    if HAS_GELU:
        shift = _gelu_erf(shift + tl.load(XB).to(tl.float32), GELU_IMPL, PRECISE, INLINE_PTX)
    return shift


@triton.jit
def _deviation(x, centre, ok, EVEN_N: tl.constexpr):
    # x - centre, and 0 in the padding lanes past N, which must not count in the sums.
    if EVEN_N:
        return x - centre
    else:
        return tl.where(ok, x - centre, 0.0)


@triton.jit
def _mean_var(sum_d, sum_d2, N):
    # Mean and (non-negative) variance of deviations from their sums over N values.
    mean_d = sum_d / N
    return mean_d, tl.maximum(sum_d2 / N - mean_d * mean_d, 0.0)


@triton.jit
def _load_row_tile(
    X,
    tile,
    n_rows,
    N,
    stride_x,
    BLOCK_N: tl.constexpr,
    ROWS: tl.constexpr,
    EVEN_N: tl.constexpr,
    POLICY: tl.constexpr,  # L2 eviction policy of the loads: "", "evict_first" or "evict_last"
):
    # Raw (input dtype) tile of ROWS rows, and each row's first value again as its own vector (the variance
    # shift; a second load of a line already on its way, so no row waits for a broadcast from registers).
    # Rows past the end read as 0 and are never stored.
    rows = tile * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    starts = X + rows.to(tl.int64) * stride_x
    ptrs = starts[:, None] + cols[None, :]
    if EVEN_N:
        mask = (rows < n_rows)[:, None]
    else:
        mask = (rows < n_rows)[:, None] & (cols < N)[None, :]
    first = tl.load(starts, mask=rows < n_rows, other=0.0)
    return tl.load(ptrs, mask=mask, other=0.0, eviction_policy=POLICY), first


@triton.jit
def _load_vector(P, cols, col_ok, EVEN_N: tl.constexpr, POLICY: tl.constexpr, INLINE_PTX: tl.constexpr):
    # A per-column vector (weight, bias, GELU bias) as fp32; every row reads it again, from L1/L2.
    if EVEN_N:
        v = tl.load(P + cols, eviction_policy=POLICY)
    else:
        v = tl.load(P + cols, mask=col_ok, other=0.0, eviction_policy=POLICY)
    return _to_f32(v, INLINE_PTX)


@triton.jit
def _normalize_row_tile(
    x_raw,
    first_raw,
    Y,
    W,
    B,
    XB,
    tile,
    n_rows,
    N,
    stride_y,
    eps,
    IS_RMS: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_GELU: tl.constexpr,
    GELU_IMPL: tl.constexpr,
    PRECISE: tl.constexpr,
    INLINE_PTX: tl.constexpr,
    BLOCK_N: tl.constexpr,
    ROWS: tl.constexpr,
    EVEN_N: tl.constexpr,
    VECTOR_POLICY: tl.constexpr,  # eviction policy of the per-column vectors
    Y_CACHE: tl.constexpr,  # cache modifier of the stores: "" or ".cs" (streamed)
    Mean,
    Rstd,
    STORE_STATS: tl.constexpr,  # store each row's mean (LayerNorm) and rstd, fp32, for the backward
):
    rows = tile * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    x = _to_f32(x_raw, INLINE_PTX)
    if HAS_GELU:
        xb = _load_vector(XB, cols, col_ok, EVEN_N, VECTOR_POLICY, INLINE_PTX)
        x = _gelu_erf(x + xb[None, :], GELU_IMPL, PRECISE, INLINE_PTX)  # padded lanes stay 0: gelu(0) = 0
    if IS_RMS:
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
        y = x * rstd[:, None]
    else:
        # Sums of deviations d from the row's first value: one reduction for both moments.
        shift = _row_shift(first_raw, XB, HAS_GELU, GELU_IMPL, PRECISE, INLINE_PTX)
        d = _deviation(x, shift[:, None], col_ok[None, :], EVEN_N)
        sum_d, sum_d2 = _sum_pair(d, d * d, 1)
        mean_d, var = _mean_var(sum_d, sum_d2, N)
        centre = shift
        if tl.max(mean_d * mean_d - RECENTRE * var, axis=0) > 0.0:  # rare: see RECENTRE
            if STORE_STATS:
                centre = centre + mean_d
            # The moments again, about the mean just found: d becomes x - mean up to a small rest.
            d = _deviation(d, mean_d[:, None], col_ok[None, :], EVEN_N)
            sum_d, sum_d2 = _sum_pair(d, d * d, 1)
            mean_d, var = _mean_var(sum_d, sum_d2, N)
        rstd = tl.rsqrt(var + eps)
        y = d * rstd[:, None] - (mean_d * rstd)[:, None]
        if STORE_STATS:
            tl.store(Mean + rows, centre + mean_d, mask=rows < n_rows)
    if STORE_STATS:
        tl.store(Rstd + rows, rstd, mask=rows < n_rows)
    if HAS_W:
        y = y * _load_vector(W, cols, col_ok, EVEN_N, VECTOR_POLICY, INLINE_PTX)[None, :]
    if HAS_B:
        y = y + _load_vector(B, cols, col_ok, EVEN_N, VECTOR_POLICY, INLINE_PTX)[None, :]
    ptrs = Y + rows.to(tl.int64)[:, None] * stride_y + cols[None, :]
    if EVEN_N:
        mask = (rows < n_rows)[:, None]
    else:
        mask = (rows < n_rows)[:, None] & col_ok[None, :]
    tl.store(ptrs, y.to(Y.dtype.element_ty), mask=mask, cache_modifier=Y_CACHE)


@triton.jit
def _whole_row_program(
    X,
    Y,
    W,
    B,
    XB,
    n_rows,
    N,
    stride_x,
    stride_y,
    eps,
    IS_RMS: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_GELU: tl.constexpr,
    GELU_IMPL: tl.constexpr,
    PRECISE: tl.constexpr,
    INLINE_PTX: tl.constexpr,
    BLOCK_N: tl.constexpr,
    ROWS: tl.constexpr,
    CTAS: tl.constexpr,
    EVICT: tl.constexpr,
    EVEN_N: tl.constexpr,
    Mean,
    Rstd,
    STORE_STATS: tl.constexpr,
):
    if EVICT:  # x is read once: streamed through L2 so that it does not push out the per-column vectors
        X_POLICY: tl.constexpr = "evict_first"
        VECTOR_POLICY: tl.constexpr = "evict_last"
        Y_CACHE: tl.constexpr = ".cs"
    else:
        X_POLICY: tl.constexpr = ""
        VECTOR_POLICY: tl.constexpr = ""
        Y_CACHE: tl.constexpr = ""
    pid = tl.program_id(0)
    if CTAS == 0:
        x_raw, first = _load_row_tile(X, pid, n_rows, N, stride_x, BLOCK_N, ROWS, EVEN_N, X_POLICY)
        _normalize_row_tile(
            x_raw, first, Y, W, B, XB, pid, n_rows, N, stride_y, eps, IS_RMS, HAS_W, HAS_B, HAS_GELU,
            GELU_IMPL, PRECISE, INLINE_PTX, BLOCK_N, ROWS, EVEN_N, VECTOR_POLICY, Y_CACHE, Mean, Rstd, STORE_STATS,
        )  # fmt: skip
    else:
        # Persistent: each program walks the tiles pid, pid + G, ... and loads the next tile before working
        # on the current one, so that a row's loads are in flight while the previous row is normalised and
        # stored, also when a 16384-wide row leaves room for only one or two blocks per SM.
        step = tl.num_programs(0)
        n_tiles = tl.cdiv(n_rows, ROWS)
        x_next, first_next = _load_row_tile(X, pid, n_rows, N, stride_x, BLOCK_N, ROWS, EVEN_N, X_POLICY)
        for tile in tl.range(pid, n_tiles, step):
            x_raw, first = x_next, first_next
            x_next, first_next = _load_row_tile(X, tile + step, n_rows, N, stride_x, BLOCK_N, ROWS, EVEN_N, X_POLICY)
            _normalize_row_tile(
                x_raw, first, Y, W, B, XB, tile, n_rows, N, stride_y, eps, IS_RMS, HAS_W, HAS_B, HAS_GELU,
                GELU_IMPL, PRECISE, INLINE_PTX, BLOCK_N, ROWS, EVEN_N, VECTOR_POLICY, Y_CACHE, Mean, Rstd,
                STORE_STATS,
            )  # fmt: skip


@triton.jit
def _load_chunk(
    X,
    XB,
    cols,
    N,
    HAS_GELU: tl.constexpr,
    GELU_IMPL: tl.constexpr,
    PRECISE: tl.constexpr,
    INLINE_PTX: tl.constexpr,
    EVEN_N: tl.constexpr,
    POLICY: tl.constexpr,  # L2 eviction policy of the x loads: "", "evict_last" or "evict_first"
    VECTOR_POLICY: tl.constexpr,  # and of the GELU bias
):
    # One chunk of a row as fp32 (GELU(x + bias) for the fused op); lanes past N read as 0.
    ok = cols < N
    if EVEN_N:
        x = _to_f32(tl.load(X + cols, eviction_policy=POLICY), INLINE_PTX)
    else:
        x = _to_f32(tl.load(X + cols, mask=ok, other=0.0, eviction_policy=POLICY), INLINE_PTX)
    if HAS_GELU:
        x = _gelu_erf(x + _load_vector(XB, cols, ok, EVEN_N, VECTOR_POLICY, INLINE_PTX), GELU_IMPL, PRECISE, INLINE_PTX)
    return x, ok


@triton.jit
def _chunk_moments(
    x_row,
    XB,
    offs,
    centre,
    N,
    HAS_GELU: tl.constexpr,
    GELU_IMPL: tl.constexpr,
    PRECISE: tl.constexpr,
    INLINE_PTX: tl.constexpr,
    CHUNK: tl.constexpr,
    EVEN_N: tl.constexpr,
    POLICY: tl.constexpr,
):
    # One pass over a row in chunks: per lane, the sums of the deviations from `centre` and of their squares.
    acc_s = tl.zeros((CHUNK,), dtype=tl.float32)
    acc_q = tl.zeros((CHUNK,), dtype=tl.float32)
    for start in tl.range(0, N, CHUNK):
        cols = start + offs
        x, ok = _load_chunk(x_row, XB, cols, N, HAS_GELU, GELU_IMPL, PRECISE, INLINE_PTX, EVEN_N, POLICY, POLICY)
        d = _deviation(x, centre, ok, EVEN_N)
        acc_s += d
        acc_q += d * d
    return acc_s, acc_q


@triton.jit
def _two_pass_program(
    X,
    Y,
    W,
    B,
    XB,
    N,
    stride_x,
    stride_y,
    eps,
    IS_RMS: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_GELU: tl.constexpr,
    GELU_IMPL: tl.constexpr,
    PRECISE: tl.constexpr,
    INLINE_PTX: tl.constexpr,
    CHUNK: tl.constexpr,
    EVICT: tl.constexpr,
    EVEN_N: tl.constexpr,
    Mean,
    Rstd,
    STORE_STATS: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    offs = tl.arange(0, CHUNK)
    if EVICT:  # the second pass re-reads the row: from L2, if the first pass kept it there
        KEEP: tl.constexpr = "evict_last"
        DROP: tl.constexpr = "evict_first"
        Y_CACHE: tl.constexpr = ".cs"
    else:
        KEEP: tl.constexpr = ""
        DROP: tl.constexpr = ""
        Y_CACHE: tl.constexpr = ""

    # First pass: shifted sums, the shift being the row's first value: a scalar load beside the first chunk's,
    # so no extra round trip, no block-wide reduction before the loop and no per-lane shift to hold
    # (registers decide how many of these programs share an SM).
    if IS_RMS:
        shift = 0.0
    else:
        shift = _row_shift(tl.load(x_row), XB, HAS_GELU, GELU_IMPL, PRECISE, INLINE_PTX)
    acc_s, acc_q = _chunk_moments(
        x_row, XB, offs, shift, N, HAS_GELU, GELU_IMPL, PRECISE, INLINE_PTX, CHUNK, EVEN_N, KEEP
    )  # fmt: skip
    if IS_RMS:
        mean = 0.0
        rstd = tl.rsqrt(tl.sum(acc_q, axis=0) / N + eps)
    else:
        sum_d, sum_d2 = _sum_pair(acc_s, acc_q, 0)
        mean_d, var = _mean_var(sum_d, sum_d2, N)
        mean = shift + mean_d
        if mean_d * mean_d > RECENTRE * var:  # rare: see RECENTRE; the moments again (from L2), about this mean
            acc_s, acc_q = _chunk_moments(
                x_row, XB, offs, mean, N, HAS_GELU, GELU_IMPL, PRECISE, INLINE_PTX, CHUNK, EVEN_N, KEEP
            )  # fmt: skip
            sum_d, sum_d2 = _sum_pair(acc_s, acc_q, 0)
            mean_d, var = _mean_var(sum_d, sum_d2, N)
            mean = mean + mean_d
        rstd = tl.rsqrt(var + eps)
    if STORE_STATS:
        tl.store(Rstd + row, rstd)
        if not IS_RMS:
            tl.store(Mean + row, mean)

    # Second pass: the row again, from L2, normalised.
    for start in tl.range(0, N, CHUNK):
        cols = start + offs
        x, ok = _load_chunk(x_row, XB, cols, N, HAS_GELU, GELU_IMPL, PRECISE, INLINE_PTX, EVEN_N, DROP, KEEP)
        y = (x - mean) * rstd
        if HAS_W:
            y = y * _load_vector(W, cols, ok, EVEN_N, KEEP, INLINE_PTX)
        if HAS_B:
            y = y + _load_vector(B, cols, ok, EVEN_N, KEEP, INLINE_PTX)
        if EVEN_N:
            tl.store(y_row + cols, y.to(Y.dtype.element_ty), cache_modifier=Y_CACHE)
        else:
            tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=ok, cache_modifier=Y_CACHE)


@triton.jit
def _norm_kernel(
    X,
    Y,
    W,
    B,
    XB,
    n_rows,
    N,
    stride_x,
    stride_y,
    eps,
    IS_RMS: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    HAS_GELU: tl.constexpr,
    GELU_IMPL: tl.constexpr,
    PRECISE: tl.constexpr,
    INLINE_PTX: tl.constexpr,
    BLOCK_N: tl.constexpr,  # next power of two of N
    EVEN_N: tl.constexpr,  # N == BLOCK_N: no column masks or padding selects
    CONTIGUOUS: tl.constexpr,  # rows of x and y packed: both row strides equal N
    CHUNK: tl.constexpr,  # 0: whole rows in registers; else two passes over each row in CHUNK-wide pieces
    ROWS: tl.constexpr,
    CTAS: tl.constexpr,
    EVICT: tl.constexpr,
    Mean=None,  # (rows,) fp32, LayerNorm's row means, written if STORE_STATS
    Rstd=None,  # (rows,) fp32, the rows' 1 / sqrt(var + eps), written if STORE_STATS
    STORE_STATS: tl.constexpr = False,  # off for inference; on when the backward needs the statistics
):
    # The row length and strides as compile-time constants where they are known: the two-pass loops then
    # have a constant trip count and constant addresses, which ptxas schedules with all of a pass's loads
    # in flight (the two-pass LayerNorm at 16384x16384 on the H200: 3651 → 4130 GB/s). No extra builds:
    # BLOCK_N is a specialisation already.
    if EVEN_N:
        N = BLOCK_N
    if CONTIGUOUS:
        stride_x = N
        stride_y = N
    if CHUNK == 0:
        _whole_row_program(
            X, Y, W, B, XB, n_rows, N, stride_x, stride_y, eps, IS_RMS, HAS_W, HAS_B, HAS_GELU, GELU_IMPL,
            PRECISE, INLINE_PTX, BLOCK_N, ROWS, CTAS, EVICT, EVEN_N, Mean, Rstd, STORE_STATS,
        )  # fmt: skip
    else:
        _two_pass_program(
            X, Y, W, B, XB, N, stride_x, stride_y, eps, IS_RMS, HAS_W, HAS_B, HAS_GELU, GELU_IMPL, PRECISE,
            INLINE_PTX, CHUNK, EVICT, EVEN_N, Mean, Rstd, STORE_STATS,
        )  # fmt: skip


def _tuned_norm_kernel() -> TurnTuner:
    # Candidates timed in turns (`_tuning`): at the widths where the best two sit within 0.5% of each other
    # (RMSNorm 16384x8192), Triton's one-after-another autotuner picked either from run to run.
    # Each op gets its own pick: the best config differs between them, and between the forward that stores
    # the statistics for a backward and the one that does not.
    key = ["N", "IS_RMS", "HAS_GELU", "STORE_STATS"]
    return TurnTuner(_norm_kernel, norm_configs(), key=key, prune=prune_norm_configs)


# One tuner per band of rows per SM (see `_tuning.rows_per_sm_band`); they share the compiled kernels.
_norm_tuned = [_tuned_norm_kernel() for _ in range(len(ROWS_PER_SM_BANDS) + 1)]


# ----------------------------------------------------------------------------------------------------------
# Launcher
# ----------------------------------------------------------------------------------------------------------


def _check_rows(fn: str, x: object) -> int:
    """x: N-d float tensor whose leading dims merge into rows of a unit-stride last dim; returns hidden."""
    check_tensor(fn, "x", x, min_ndim=1)
    n = x.shape[-1]
    if n == 0:
        raise ValueError(f"{fn}: x must have a non-empty last dim, got shape {tuple(x.shape)}")
    if x.stride(-1) != 1 and n > 1:
        raise ValueError(f"{fn}: x must be contiguous in its last dim, got strides {tuple(x.stride())}")
    try:
        x.view(-1, n)
    except RuntimeError:
        raise ValueError(
            f"{fn}: x must be viewable as (rows, {n}) without a copy, got shape {tuple(x.shape)} "
            f"and strides {tuple(x.stride())}"
        ) from None
    return n


def _check_vector(fn: str, name: str, t: object, x: torch.Tensor, optional: bool = True) -> None:
    if t is None and optional:
        return
    check_tensor(fn, name, t, dtypes=(x.dtype, torch.float32) if x.dtype != torch.float32 else (x.dtype,))
    n = x.shape[-1]
    if tuple(t.shape) != (n,):
        raise ValueError(f"{fn}: {name} must have shape ({n},) to match x's last dim, got shape {tuple(t.shape)}")
    if t.stride(0) != 1 and n > 1:
        raise ValueError(f"{fn}: {name} must be contiguous, got stride {t.stride(0)}")


def _norm_forward(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    gelu_bias: torch.Tensor | None,
    eps: float,
    is_rms: bool,
    *,
    config: triton.Config | None = None,
    gelu_impl: int = GELU_IMPL,
    mean: torch.Tensor | None = None,
    rstd: torch.Tensor | None = None,
) -> torch.Tensor:
    """Launch without validation; `config` (a `norm_configs()`-style config) skips the autotuner. With `rstd`
    (and `mean`, LayerNorm), fp32 tensors of one element per row, the kernel also stores the statistics."""
    n = x.shape[-1]
    x2 = x.view(-1, n)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n_rows = x2.shape[0]
    if n_rows == 0:
        return y
    y2 = y.view(-1, n)
    # Absent operands become x itself: never read, since the matching HAS_* flag is off.
    args = (
        x2,
        y2,
        x2 if weight is None else weight,
        x2 if bias is None else bias,
        x2 if gelu_bias is None else gelu_bias,
        n_rows,
        n,
        x2.stride(0),
        y2.stride(0),
        eps,
    )
    block_n = next_pow2(n)
    flags = {
        "IS_RMS": is_rms,
        "HAS_W": weight is not None,
        "HAS_B": bias is not None,
        "HAS_GELU": gelu_bias is not None,
        "GELU_IMPL": gelu_impl,
        "PRECISE": x.dtype == torch.float32,  # the 7-term GELU fit; 16-bit outputs take 5 terms
        # Hand-written PTX (MUFU ops, bf16 widened in pairs): not under the interpreter, which cannot run it,
        # nor for rows under 256, whose tiles may leave a thread a single bf16.
        "INLINE_PTX": not INTERPRET and block_n >= 256,
        "BLOCK_N": block_n,
        "EVEN_N": n == block_n,
        "CONTIGUOUS": x2.stride(0) == n and y2.stride(0) == n,
        "STORE_STATS": rstd is not None,
    }
    if rstd is not None:
        flags["Rstd"] = rstd
        if mean is not None:
            flags["Mean"] = mean
    sms = num_sms(x.device)

    def grid(meta: dict) -> tuple[int]:
        tiles = triton.cdiv(n_rows, meta["ROWS"])
        return (tiles if meta["CTAS"] == 0 else min(tiles, sms * meta["CTAS"]),)

    if config is None:
        tuner = _norm_tuned[rows_per_sm_band(n_rows, sms)]
        tuner[grid](*args, **flags)
        config = tuner.best_config
    else:
        kwargs = {"CHUNK": 0, "ROWS": 1, "CTAS": 0, "EVICT": 0, **config.all_kwargs()}
        if kwargs["CHUNK"] == 0 and block_n > MAX_FUSED_BLOCK:
            raise ValueError(f"rows of {n} do not fit the whole-row programs (at most {MAX_FUSED_BLOCK})")
        if kwargs["CHUNK"] > block_n:  # the unmasked (EVEN_N) build relies on chunks that divide the row
            raise ValueError(f"a chunk of {kwargs['CHUNK']} is wider than rows of {n}")
        _norm_kernel[grid(kwargs)](*args, **flags, **kwargs)
    note_launch("norm", config, "two-pass" if config.kwargs.get("CHUNK") else "whole-row")
    return y


class _NormFunction(torch.autograd.Function):
    """Any of the three ops with a backward (norm_backward.py): the forward also stores the rows' fp32 rstd
    (and mean, LayerNorm) and saves x, weight, the GELU bias and those statistics; never the output."""

    @staticmethod
    def forward(ctx, x, weight, bias, gelu_bias, eps: float, is_rms: bool) -> torch.Tensor:
        rstd = torch.empty(x.numel() // x.shape[-1], dtype=torch.float32, device=x.device)
        mean = None if is_rms else torch.empty_like(rstd)
        y = _norm_forward(x, weight, bias, gelu_bias, eps, is_rms, mean=mean, rstd=rstd)
        ctx.save_for_backward(x, weight, gelu_bias, mean, rstd)
        ctx.is_rms = is_rms
        ctx.bias_dtype = None if bias is None else bias.dtype  # the bias itself is not needed
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy: torch.Tensor):
        x, weight, gelu_bias, mean, rstd = ctx.saved_tensors
        need_dx, need_dw, need_db, need_dxb = ctx.needs_input_grad[:4]
        with on_device(x):
            dx, dw, db, dxb = norm_backward(
                dy, x, weight, gelu_bias, mean, rstd, ctx.is_rms, need_dw=need_dw,
                db_dtype=ctx.bias_dtype if need_db else None, need_dxb=need_dxb, gelu_impl=GELU_IMPL,
            )  # fmt: skip
        return dx if need_dx else None, dw, db, dxb, None, None


def _norm(x, weight, bias, gelu_bias, eps: float, is_rms: bool) -> torch.Tensor:
    # Inference (no input requires grad, or grad mode off) runs the plain forward: nothing stored or saved.
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, weight, bias, gelu_bias)):
        return _NormFunction.apply(x, weight, bias, gelu_bias, eps, is_rms)
    return _norm_forward(x, weight, bias, gelu_bias, eps, is_rms)


def layer_norm(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float = 1e-5
) -> torch.Tensor:
    """LayerNorm over the last dim of x (fp32 statistics); weight/bias of shape (hidden,), or None."""
    _check_rows("layer_norm", x)
    _check_vector("layer_norm", "weight", weight, x)
    _check_vector("layer_norm", "bias", bias, x)
    check_same_device("layer_norm", x=x, weight=weight, bias=bias)
    eps = check_eps("layer_norm", eps)
    with on_device(x):
        return _norm(x, weight, bias, None, eps, is_rms=False)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dim of x: x / sqrt(mean(x^2) + eps) * weight (fp32 statistics)."""
    _check_rows("rms_norm", x)
    _check_vector("rms_norm", "weight", weight, x)
    check_same_device("rms_norm", x=x, weight=weight)
    eps = check_eps("rms_norm", eps)
    with on_device(x):
        return _norm(x, weight, None, None, eps, is_rms=True)


def bias_gelu_layer_norm(
    x: torch.Tensor,
    bias: torch.Tensor,
    weight: torch.Tensor | None,
    ln_bias: torch.Tensor | None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """LayerNorm(GELU(x + bias)) with exact (erf) GELU in one kernel: x read once, the result written once."""
    _check_rows("bias_gelu_layer_norm", x)
    _check_vector("bias_gelu_layer_norm", "bias", bias, x, optional=False)
    _check_vector("bias_gelu_layer_norm", "weight", weight, x)
    _check_vector("bias_gelu_layer_norm", "ln_bias", ln_bias, x)
    check_same_device("bias_gelu_layer_norm", x=x, bias=bias, weight=weight, ln_bias=ln_bias)
    eps = check_eps("bias_gelu_layer_norm", eps)
    with on_device(x):
        return _norm(x, weight, ln_bias, bias, eps, is_rms=False)


# What tierbench.kernels exports of this module.
EXPORTS = {
    "layer_norm": Export(FLOAT_DTYPES, "norm"),
    "rms_norm": Export(FLOAT_DTYPES, "norm"),
    "bias_gelu_layer_norm": Export(FLOAT_DTYPES, "norm"),
}
