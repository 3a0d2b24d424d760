"""Backward of the row normalizations (layer_norm, rms_norm, bias_gelu_layer_norm) from the forward's statistics.

The forward stores each row's fp32 rstd (and mean, LayerNorm), so no row needs its moments again. With
xhat = (h - mean) * rstd, g = dy * weight (dy without a weight) and N the row length:
    LayerNorm  dh = rstd * (g - mean(g) - xhat * mean(g * xhat))
    RMSNorm    dh = rstd * (g - xhat * mean(g * xhat))
    dweight = sum over rows of dy * xhat, dbias = sum over rows of dy.
For the fused op h = GELU(x + bias) is recomputed from x (bit for bit as the forward computed it, so xhat
matches the stored statistics), dx = dh * GELU'(x + bias), and the GELU bias's gradient is the sum of dx
over rows.

Three kinds of launches, by width (BLOCK_N = next power of two of the hidden size):
- whole rows (BLOCK_N <= 8192): one persistent kernel; each program walks tiles of ROWS rows, reads x, dy
  and the vectors once, writes dx once, and adds its rows' dweight/dbias terms to fp32 accumulators in
  registers, written once per program as a row of partial sums. Prefetching candidates load the next
  tile's x and dy before working on the current one, pipelined ones (STAGES 2, forced configs only) have
  Triton's pipeliner bring it into shared memory instead; RELOAD candidates load the vectors every tile.
- split rows (LayerNorm and RMSNorm with BLOCK_N 16384; other widths by a forced SPLIT config): the same
  kernel, each row shared by SPLIT programs side by side, each holding BLOCK_N / SPLIT of its columns: a
  program reads its partners' columns too for the row sums, so a row is read SPLIT times, but its partners
  read it at the same time (neighbouring program ids walk the same rows), and the repeats come from L2
  rather than memory. The tuner's list there is two programs a row. Forced EXCHANGE configs read only their
  own columns instead: each program publishes its row sums through memory (`_exchange_sums`: a release on
  its counter, then an acquire on its partners') and waits for its partners' (the programs must be resident
  together, as a persistent grid of one program an SM is; the interpreter, one program at a time, refuses
  them).
- two passes (wider rows, the fused op past 8192, or a forced CHUNK config): a row-sums kernel takes
  mean(g) and mean(g * xhat) per row in CHUNK-wide pieces, then a chunk kernel over (column chunk, group of
  rows) writes dx and one row of partial sums per group. x and dy are read twice, dx written once.
Then a small kernel adds the partial sums over programs, every gradient's in one launch (no atomics: the
gradients are the same from run to run for one config). Whole rows, split rows, the row sums and the chunk
kernel each have a `TurnTuner` over a few candidates (one config under the interpreter).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from ._common import INTERPRET, next_pow2, note_launch, num_sms, round_to
from ._norm_math import _gelu_and_grad, _sum_pair, _to_f32
from ._tuning import ROWS_PER_SM_BANDS, TurnTuner, rows_per_sm_band

# ----------------------------------------------------------------------------------------------------------
# Configs
# ----------------------------------------------------------------------------------------------------------

# Most columns (a power of two) one program of the whole-row backward holds. Each thread holds its columns'
# fp32 accumulators (up to three vectors) across all its rows besides the row itself, so wider rows are split
# between programs or take two passes.
# The fused op holds the most (GELU' too, and a third accumulator): at 8192 its whole-row builds spill unless
# they reload the vectors every tile (RELOAD); on an H100 the 16-warp RELOAD build ran 1.23x the two passes.
MAX_WHOLE_ROW_BLOCK = 8192

# Widest LayerNorm and RMSNorm row of the tuned split-row launch (two programs a row, each holding 8192
# columns): its second reading of a row comes from L2, where the two passes read x and dy twice from memory.
# On an H100, LayerNorm at 16384 x 16384 ran 1.28x the two passes (75% of copy against 58%). The fused op
# split so ran 0.79x its two passes and keeps them; four and eight programs a row ran 0.2-0.6x.
MAX_SPLIT_ROW_BLOCK = 2 * MAX_WHOLE_ROW_BLOCK


# Most warps resident per SM on sm_90: bounds blocks per SM x warps of the persistent candidates.
_MAX_WARPS_PER_SM = 64

# Each program writes one row of fp32 partial sums per gradient vector (up to three), which the reduction
# reads again: 24 bytes a column against 6 per row and column of x, dy and dx (16-bit). So a program takes
# at least this many rows where there are enough to keep every SM busy anyway (the partial sums then cost
# at most 4 / 32 of the row traffic), and groups of the chunk kernel take at least this many rows.
_MIN_ROWS_PER_PROGRAM = 32


def whole_row_config(
    rows: int = 1,
    ctas: int = 1,
    warps: int = 4,
    prefetch: bool = False,
    reload: bool = False,
    split: int = 1,
    stages: int = 1,
    exchange: bool = False,
) -> triton.Config:
    """A whole-row backward candidate: ROWS rows per tile, CTAS programs per SM (persistent); PREFETCH loads
    a program's next tile of x and dy into registers before it works on the current one; STAGES > 1 has
    Triton's pipeliner bring the next STAGES - 1 tiles into shared memory instead (cp.async), which holds no
    registers; RELOAD loads the weight and the GELU bias again for every tile (from L1) instead of holding
    them in registers; SPLIT programs share each row, BLOCK_N / SPLIT columns each (one row per tile, no
    prefetching unless EXCHANGE); EXCHANGE has a split row's programs trade their columns' row sums through
    memory (each reads only its own columns, then waits for its partners' sums of the row) instead of each
    reading the whole row."""
    if split < 1 or split & (split - 1):
        raise ValueError(f"split must be a power of two, got {split}")
    if split > 1 and (rows != 1 or (prefetch and not exchange)):
        raise ValueError("a split row is one row per tile, without prefetching unless its programs exchange sums")
    if exchange and split == 1:
        raise ValueError("only programs that split a row exchange its sums")
    if stages < 1 or (stages > 1 and prefetch):
        raise ValueError(f"stages must be 1 or more, and 1 with prefetching; got {stages}")
    kwargs = {"ROWS": rows, "CTAS": ctas, "PREFETCH": prefetch, "RELOAD": reload, "SPLIT": split, "STAGES": stages}
    return triton.Config({**kwargs, "EXCHANGE": exchange}, num_warps=warps, num_stages=1)


def chunk_config(chunk: int, warps: int = 4) -> triton.Config:
    """A two-pass backward candidate: rows in CHUNK-wide pieces (the row sums' and the chunk kernel's config)."""
    return triton.Config({"CHUNK": chunk}, num_warps=warps, num_stages=1)


def whole_row_configs() -> list[triton.Config]:
    """Rows per tile x warps x programs per SM (see _whole_row_slots: fewer where rows are few), and a few
    prefetching ones."""
    if INTERPRET:
        return [whole_row_config(rows=2, ctas=1, prefetch=True)]
    plain = [whole_row_config(rows=r, ctas=c, warps=w) for r in (1, 4) for w in (4, 8, 16, 32) for c in (1, 2, 4)]
    # One program an SM working one row at a time leaves its loads waiting on its arithmetic (the fused op
    # at 4096 wide): the prefetching candidates, one and two programs an SM. On an H100 the tuner took them
    # for LayerNorm at 8192, RMSNorm at 4096 and 8192 and the fused op at 2048 and 4096 (242 -> 200 us).
    prefetching = [whole_row_config(rows=1, ctas=c, warps=w, prefetch=True) for w in (8, 16) for c in (1, 2)]
    # The vectors reloaded every tile: the fused op's whole-row build at 8192 wide without its spill.
    reloading = [whole_row_config(rows=1, ctas=1, warps=w, reload=True) for w in (16, 32)]
    return plain + prefetching + reloading


def pipelined_configs() -> list[triton.Config]:
    """Whole-row candidates whose next row Triton's pipeliner brings into shared memory by cp.async while
    this one is worked on (STAGES 2): the prefetch without its registers, for the fused op, whose one program
    an SM leaves its loads waiting on its arithmetic. Forced only: on an H100 at 16384 rows they ran 0.67-0.98x
    the tuner's pick (LayerNorm and the fused op at 4096 and 8192 wide; the fused op's best 0.88x)."""
    pipelined = [whole_row_config(rows=1, ctas=c, warps=w, stages=2) for w in (8, 16) for c in (1, 2)]
    return [*pipelined, whole_row_config(rows=1, ctas=1, warps=16, reload=True, stages=2)]


def split_row_configs() -> list[triton.Config]:
    """Whole-row candidates for rows wider than a program holds (SPLIT programs a row), to force any of them.
    Two programs an SM only at 8 warps (the 16- and 32-warp builds use 60-128 registers a thread: one fits).
    Then two programs a row that exchange their row sums, one program an SM, the next row prefetched or not."""
    reading = [
        whole_row_config(rows=1, ctas=c, warps=w, reload=r, split=s)
        for s in (2, 4, 8) for w in (8, 16, 32) for c in ((1, 2) if w == 8 else (1,)) for r in (False, True)
    ]  # fmt: skip
    # Prefetching with the vectors held spills (LayerNorm at 16384: 116 bytes on sm_90).
    exchanging = [
        whole_row_config(rows=1, ctas=1, warps=w, prefetch=p, reload=r, split=2, exchange=True)
        for w in (8, 16) for p, r in ((False, False), (False, True), (True, True))
    ]  # fmt: skip
    return reading + exchanging


def tuned_split_row_configs() -> list[triton.Config]:
    """The split-row tuner's list (rows up to MAX_SPLIT_ROW_BLOCK): two programs a row, one program an SM,
    16 warps, the vectors held or reloaded. On an H100 at 16384 wide the 32-warp builds (which spill) ran
    0.85-0.89x these, four and eight programs a row 0.2-0.6x."""
    if INTERPRET:
        return [whole_row_config(rows=1, ctas=1, split=2)]
    return [whole_row_config(rows=1, ctas=1, warps=16, reload=r, split=2) for r in (False, True)]


def prune_whole_row_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """4..16 elements of a program's tile per thread (registers hold the accumulators too); several rows per
    tile only for rows of 1024 or less; at most _MAX_WARPS_PER_SM warps of resident programs per SM; the fused
    op holding more than 4096 columns a program only with RELOAD (its other builds spill there: 144-504 bytes
    on sm_90); no program holding more than MAX_WHOLE_ROW_BLOCK columns."""
    if len(configs) <= 1:
        return configs
    n_rows, block_n = named_args["n_rows"], kwargs["BLOCK_N"]
    kept = []
    for cfg in configs:
        rows, ctas, warps = cfg.kwargs["ROWS"], cfg.kwargs["CTAS"], cfg.num_warps
        held = block_n // cfg.kwargs["SPLIT"]  # a program's columns
        if not 4 <= rows * held // (32 * warps) <= 16 or ctas * warps > _MAX_WARPS_PER_SM:
            continue
        if held > MAX_WHOLE_ROW_BLOCK:
            continue
        if kwargs.get("HAS_GELU", False) and held > 4096 and not cfg.kwargs["RELOAD"]:
            continue
        if rows > 1 and (block_n > 1024 or rows > n_rows):
            continue
        kept.append(cfg)
    return kept or [min(configs, key=lambda c: c.kwargs["ROWS"] * c.num_warps * c.kwargs["CTAS"])]


def chunk_configs() -> list[triton.Config]:
    if INTERPRET:
        return [chunk_config(1024)]
    return [chunk_config(c, w) for c in (512, 1024, 2048, 4096) for w in (2, 4, 8, 16)]


def prune_chunk_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Chunks no wider than the row, 4..16 elements of a chunk per thread (the interpreter's one config is cut
    to the row's width)."""
    block_n = kwargs["BLOCK_N"]
    if len(configs) <= 1:
        return [chunk_config(min(c.kwargs["CHUNK"], block_n), c.num_warps) for c in configs]
    kept = [c for c in configs if c.kwargs["CHUNK"] <= block_n and 4 <= c.kwargs["CHUNK"] // (32 * c.num_warps) <= 16]
    return kept or [min(configs, key=lambda c: c.kwargs["CHUNK"])]


# ----------------------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------------------


@triton.jit
def _normalized(x, xb, mean, rstd, IS_RMS: tl.constexpr, HAS_GELU: tl.constexpr, GELU_IMPL: tl.constexpr,
                PRECISE: tl.constexpr, INLINE_PTX: tl.constexpr):  # fmt: skip
    # xhat of the forward (fp32), and GELU'(x + bias) for the fused op (1.0 otherwise, unused).
    if HAS_GELU:
        h, dgelu = _gelu_and_grad(x + xb, GELU_IMPL, PRECISE, INLINE_PTX)
    else:
        h = x
        dgelu = 1.0
    if IS_RMS:
        xhat = h * rstd
    else:
        xhat = (h - mean) * rstd
    return xhat, dgelu


@triton.jit
def _input_grad(g, xhat, dgelu, mean_g, mean_gx, rstd, IS_RMS: tl.constexpr, HAS_GELU: tl.constexpr):
    # dx from g = dy * weight and the row means of g and g * xhat.
    if IS_RMS:
        dh = (g - xhat * mean_gx) * rstd
    else:
        dh = (g - mean_g - xhat * mean_gx) * rstd
    if HAS_GELU:
        dh = dh * dgelu
    return dh


@triton.jit
def _row_sums(g, xhat, IS_RMS: tl.constexpr):
    # Per row of a (rows, columns) tile: sum(g * xhat), and sum(g) for LayerNorm (0.0 for RMSNorm).
    if IS_RMS:
        sum_gx = tl.sum(g * xhat, axis=1)
        sum_g = 0.0
    else:
        sum_gx, sum_g = _sum_pair(g * xhat, g, 1)
    return sum_gx, sum_g


@triton.jit
def _vectors(W, XB, cols, col_ok, HAS_W: tl.constexpr, HAS_GELU: tl.constexpr):
    # The weight and the GELU bias as fp32 rows (1.0 and 0.0 where the op has none).
    if HAS_W:
        w = tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    else:
        w = 1.0
    if HAS_GELU:
        xb = tl.load(XB + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    else:
        xb = 0.0
    return w, xb


@triton.jit
def _load_tile(X, DY, tile, n_rows, cols, col_ok, stride_x, stride_dy, ROWS: tl.constexpr):
    # x and dy of a tile of ROWS rows, as stored. Rows past the end (a tile past the last included) read as
    # zeros; with rstd 0 their xhat, g and dx are 0 and add nothing.
    rows = tile * ROWS + tl.arange(0, ROWS)
    mask = (rows < n_rows)[:, None] & col_ok[None, :]
    offs = rows.to(tl.int64)[:, None]
    x = tl.load(X + offs * stride_x + cols[None, :], mask=mask, other=0.0)
    dy = tl.load(DY + offs * stride_dy + cols[None, :], mask=mask, other=0.0)
    return x, dy


@triton.jit
def _exchange_sums(Sums, Counts, slot, part, turn, sum_gx, sum_g, SPLIT: tl.constexpr, IS_RMS: tl.constexpr):
    # Publishes this program's sums of its row's columns as its `turn`-th row, then adds each partner's sums of
    # the row once that partner has published as many. Two boxes a program, by the turn's parity: a program
    # writes a box again only after every partner has published the next row, so after it read this one.
    me = slot * SPLIT + part
    one = tl.arange(0, 1)
    box = Sums + (me * 2 + turn % 2) * 2
    tl.store(box + one, sum_gx)
    if not IS_RMS:
        tl.store(box + 1 + one, sum_g)
    tl.debug_barrier()  # every thread's stores before the one thread's release
    tl.atomic_add(Counts + me, 1, sem="release", scope="gpu")
    for q in tl.static_range(1, SPLIT):
        other = slot * SPLIT + (part + q) % SPLIT
        seen = tl.atomic_add(Counts + other, 0, sem="acquire", scope="gpu")
        while seen <= turn:
            seen = tl.atomic_add(Counts + other, 0, sem="acquire", scope="gpu")
        tl.debug_barrier()  # the partner's sums read only after the acquire (volatile: from L2, not L1)
        theirs = Sums + (other * 2 + turn % 2) * 2
        sum_gx += tl.load(theirs + one, volatile=True)
        if not IS_RMS:
            sum_g += tl.load(theirs + 1 + one, volatile=True)
    return sum_gx, sum_g


@triton.jit
def _whole_row_bwd_kernel(
    X,
    DY,
    DX,
    W,
    XB,
    Mean,
    Rstd,
    PW,  # (programs, N) fp32 partial sums of dweight, one row per program
    PB,  # of dbias
    PXB,  # of the GELU bias's gradient
    Sums,  # (programs, 2, 2) fp32 with EXCHANGE: each program's two boxes for its row sums
    Counts,  # (programs,) int32 with EXCHANGE, zeroed: the rows each program has published
    n_rows,
    N,
    stride_x,
    stride_dy,
    stride_dx,
    IS_RMS: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_GELU: tl.constexpr,
    NEED_DW: tl.constexpr,
    NEED_DB: tl.constexpr,
    NEED_DXB: tl.constexpr,
    GELU_IMPL: tl.constexpr,
    PRECISE: tl.constexpr,
    INLINE_PTX: tl.constexpr,
    BLOCK_N: tl.constexpr,
    EVEN_N: tl.constexpr,
    ROWS: tl.constexpr,
    CTAS: tl.constexpr,  # programs per SM: sizes the grid only
    PREFETCH: tl.constexpr,
    RELOAD: tl.constexpr,  # the vectors loaded every tile: fewer registers held across the loop
    SPLIT: tl.constexpr,  # programs per row, side by side (neighbouring ids), BLOCK_N / SPLIT columns each
    STAGES: tl.constexpr,  # the tile loop's pipeline depth (> 1: the next tiles' x and dy by cp.async)
    EXCHANGE: tl.constexpr,  # a split row's sums traded through Sums instead of each program reading the row
):
    if EVEN_N:
        N = BLOCK_N
    PART: tl.constexpr = BLOCK_N // SPLIT
    part = tl.program_id(0) % SPLIT
    slot = tl.program_id(0) // SPLIT  # its row of partial sums, and where its walk over the tiles starts
    cols = part * PART + tl.arange(0, PART)
    col_ok = cols < N
    # The vectors once per program, or every tile with RELOAD (plain widening: a thread may hold a single bf16
    # of them).
    w, xb = _vectors(W, XB, cols, col_ok, HAS_W, HAS_GELU)
    acc_dw = tl.zeros([PART], dtype=tl.float32)
    acc_db = tl.zeros([PART], dtype=tl.float32)
    acc_dxb = tl.zeros([PART], dtype=tl.float32)
    step = tl.num_programs(0) // SPLIT
    if EXCHANGE:  # the rows published by earlier launches on these counters (replays), the same for partners
        base = tl.load(Counts + tl.program_id(0), volatile=True)
    if PREFETCH:
        x_raw, dy_raw = _load_tile(X, DY, slot, n_rows, cols, col_ok, stride_x, stride_dy, ROWS)
    for tile in tl.range(slot, tl.cdiv(n_rows, ROWS), step, num_stages=STAGES):
        rows = tile * ROWS + tl.arange(0, ROWS)
        row_ok = rows < n_rows
        mask = row_ok[:, None] & col_ok[None, :]
        offs = rows.to(tl.int64)[:, None]
        if PREFETCH:  # this tile's rows came with the last step; the next tile's loads go out before its work
            x = _to_f32(x_raw, INLINE_PTX)
            dy = _to_f32(dy_raw, INLINE_PTX)
            x_raw, dy_raw = _load_tile(X, DY, tile + step, n_rows, cols, col_ok, stride_x, stride_dy, ROWS)
        else:
            raw_x, raw_dy = _load_tile(X, DY, tile, n_rows, cols, col_ok, stride_x, stride_dy, ROWS)
            x = _to_f32(raw_x, INLINE_PTX)
            dy = _to_f32(raw_dy, INLINE_PTX)
        if RELOAD:
            w, xb = _vectors(W, XB, cols, col_ok, HAS_W, HAS_GELU)
        rstd = tl.load(Rstd + rows, mask=row_ok, other=0.0)[:, None]
        if IS_RMS:
            mean = 0.0
        else:
            mean = tl.load(Mean + rows, mask=row_ok, other=0.0)[:, None]
        xhat, dgelu = _normalized(x, xb, mean, rstd, IS_RMS, HAS_GELU, GELU_IMPL, PRECISE, INLINE_PTX)
        g = dy * w  # 0 in the padding lanes, so the padding adds nothing to the row sums
        sum_gx, sum_g = _row_sums(g, xhat, IS_RMS)
        if EXCHANGE:
            turn = base + (tile - slot) // step
            sum_gx, sum_g = _exchange_sums(Sums, Counts, slot, part, turn, sum_gx, sum_g, SPLIT, IS_RMS)
        else:
            for q in tl.range(1, SPLIT):  # the partners' columns, for the row sums only
                other = ((part + q) % SPLIT) * PART + tl.arange(0, PART)
                other_ok = other < N
                raw_x, raw_dy = _load_tile(X, DY, tile, n_rows, other, other_ok, stride_x, stride_dy, ROWS)
                w_o, xb_o = _vectors(W, XB, other, other_ok, HAS_W, HAS_GELU)
                xhat_o, _ = _normalized(_to_f32(raw_x, INLINE_PTX), xb_o, mean, rstd, IS_RMS, HAS_GELU, GELU_IMPL,
                                        PRECISE, INLINE_PTX)  # fmt: skip
                part_gx, part_g = _row_sums(_to_f32(raw_dy, INLINE_PTX) * w_o, xhat_o, IS_RMS)
                sum_gx += part_gx
                sum_g += part_g
        mean_gx = (sum_gx / N)[:, None]
        if IS_RMS:
            mean_g = 0.0
        else:
            mean_g = (sum_g / N)[:, None]
        dx = _input_grad(g, xhat, dgelu, mean_g, mean_gx, rstd, IS_RMS, HAS_GELU)
        tl.store(DX + offs * stride_dx + cols[None, :], round_to(dx, DX.dtype.element_ty), mask=mask)
        if NEED_DW:
            acc_dw += tl.sum(dy * xhat, axis=0)
        if NEED_DB:
            acc_db += tl.sum(dy, axis=0)
        if NEED_DXB:
            if not EVEN_N:  # dx is not 0 in the padding lanes
                dx = tl.where(col_ok[None, :], dx, 0.0)
            acc_dxb += tl.sum(dx, axis=0)
    out = slot.to(tl.int64) * N + cols  # the slot's row, this program's columns
    if NEED_DW:
        tl.store(PW + out, acc_dw, mask=col_ok)
    if NEED_DB:
        tl.store(PB + out, acc_db, mask=col_ok)
    if NEED_DXB:
        tl.store(PXB + out, acc_dxb, mask=col_ok)


@triton.jit
def _row_sums_kernel(
    X,
    DY,
    W,
    XB,
    Mean,
    Rstd,
    MeanG,  # (rows,) fp32: mean(g) (LayerNorm)
    MeanGX,  # (rows,) fp32: mean(g * xhat)
    N,
    stride_x,
    stride_dy,
    IS_RMS: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_GELU: tl.constexpr,
    GELU_IMPL: tl.constexpr,
    PRECISE: tl.constexpr,
    INLINE_PTX: tl.constexpr,
    BLOCK_N: tl.constexpr,
    EVEN_N: tl.constexpr,  # N == BLOCK_N: chunks (powers of two up to BLOCK_N) divide the row
    CHUNK: tl.constexpr,
):
    # First pass of the two-pass backward: one row per program, in CHUNK-wide pieces.
    if EVEN_N:
        N = BLOCK_N
    row = tl.program_id(0).to(tl.int64)
    rstd = tl.load(Rstd + row)
    mean = 0.0 if IS_RMS else tl.load(Mean + row)
    acc_g = tl.zeros([CHUNK], dtype=tl.float32)
    acc_gx = tl.zeros([CHUNK], dtype=tl.float32)
    for start in tl.range(0, N, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        ok = cols < N
        x = _to_f32(tl.load(X + row * stride_x + cols, mask=ok, other=0.0), INLINE_PTX)
        dy = _to_f32(tl.load(DY + row * stride_dy + cols, mask=ok, other=0.0), INLINE_PTX)
        g = dy * _to_f32(tl.load(W + cols, mask=ok, other=0.0), INLINE_PTX) if HAS_W else dy
        xb = _to_f32(tl.load(XB + cols, mask=ok, other=0.0), INLINE_PTX) if HAS_GELU else 0.0
        xhat, _ = _normalized(x, xb, mean, rstd, IS_RMS, HAS_GELU, GELU_IMPL, PRECISE, INLINE_PTX)
        acc_g += g
        acc_gx += g * xhat
    if IS_RMS:
        tl.store(MeanGX + row, tl.sum(acc_gx, axis=0) / N)
    else:
        sum_gx, sum_g = _sum_pair(acc_gx, acc_g, 0)
        tl.store(MeanGX + row, sum_gx / N)
        tl.store(MeanG + row, sum_g / N)


@triton.jit
def _chunk_bwd_kernel(
    X,
    DY,
    DX,
    W,
    XB,
    Mean,
    Rstd,
    MeanG,
    MeanGX,
    PW,  # (groups, N) fp32 partial sums, one row per group of rows
    PB,
    PXB,
    n_rows,
    N,
    group_rows,  # rows per group
    stride_x,
    stride_dy,
    stride_dx,
    IS_RMS: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_GELU: tl.constexpr,
    NEED_DW: tl.constexpr,
    NEED_DB: tl.constexpr,
    NEED_DXB: tl.constexpr,
    GELU_IMPL: tl.constexpr,
    PRECISE: tl.constexpr,
    INLINE_PTX: tl.constexpr,
    BLOCK_N: tl.constexpr,
    EVEN_N: tl.constexpr,
    CHUNK: tl.constexpr,
):
    # Second pass: program (chunk c, group g) writes dx of columns c for the rows of group g.
    if EVEN_N:
        N = BLOCK_N
    n_chunks = tl.cdiv(N, CHUNK)
    group = tl.program_id(0) // n_chunks
    cols = (tl.program_id(0) - group * n_chunks) * CHUNK + tl.arange(0, CHUNK)
    ok = cols < N
    w = tl.load(W + cols, mask=ok, other=0.0).to(tl.float32) if HAS_W else 1.0
    xb = tl.load(XB + cols, mask=ok, other=0.0).to(tl.float32) if HAS_GELU else 0.0
    acc_dw = tl.zeros([CHUNK], dtype=tl.float32)
    acc_db = tl.zeros([CHUNK], dtype=tl.float32)
    acc_dxb = tl.zeros([CHUNK], dtype=tl.float32)
    first = group.to(tl.int64) * group_rows
    for row in tl.range(first, tl.minimum(first + group_rows, n_rows)):
        x = _to_f32(tl.load(X + row * stride_x + cols, mask=ok, other=0.0), INLINE_PTX)
        dy = _to_f32(tl.load(DY + row * stride_dy + cols, mask=ok, other=0.0), INLINE_PTX)
        rstd = tl.load(Rstd + row)
        if IS_RMS:
            mean = 0.0
            mean_g = 0.0
        else:
            mean = tl.load(Mean + row)
            mean_g = tl.load(MeanG + row)
        xhat, dgelu = _normalized(x, xb, mean, rstd, IS_RMS, HAS_GELU, GELU_IMPL, PRECISE, INLINE_PTX)
        dx = _input_grad(dy * w, xhat, dgelu, mean_g, tl.load(MeanGX + row), rstd, IS_RMS, HAS_GELU)
        tl.store(DX + row * stride_dx + cols, round_to(dx, DX.dtype.element_ty), mask=ok)
        if NEED_DW:
            acc_dw += dy * xhat
        if NEED_DB:
            acc_db += dy
        if NEED_DXB:
            acc_dxb += dx
    out = group.to(tl.int64) * N + cols
    if NEED_DW:
        tl.store(PW + out, acc_dw, mask=ok)
    if NEED_DB:
        tl.store(PB + out, acc_db, mask=ok)
    if NEED_DXB:
        tl.store(PXB + out, acc_dxb, mask=ok)


@triton.jit
def _sum_partials_kernel(
    P, OUT0, OUT1, OUT2, n_parts, N, stride_v, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr
):  # fmt: skip
    # Program (column block, gradient v): OUT_v[c] = sum over p of P[v, p, c] (fp32), in one fixed order for a
    # given shape: the same sum on every run.
    v = tl.program_id(1)
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < N
    base = P + v.to(tl.int64) * stride_v
    acc = tl.zeros([BLOCK_P, BLOCK_C], dtype=tl.float32)
    for start in tl.range(0, n_parts, BLOCK_P):
        parts = start + tl.arange(0, BLOCK_P)
        mask = (parts < n_parts)[:, None] & col_ok[None, :]
        acc += tl.load(base + parts.to(tl.int64)[:, None] * N + cols[None, :], mask=mask, other=0.0)
    total = tl.sum(acc, axis=0)
    if v == 0:
        tl.store(OUT0 + cols, round_to(total, OUT0.dtype.element_ty), mask=col_ok)
    elif v == 1:
        tl.store(OUT1 + cols, round_to(total, OUT1.dtype.element_ty), mask=col_ok)
    else:
        tl.store(OUT2 + cols, round_to(total, OUT2.dtype.element_ty), mask=col_ok)


# Elements of partial sums a program adds per step (32 fp32 registers a thread at 4 warps).
_SUM_STEP_ELEMS = 4096


@functools.cache  # called in every (timed) backward: the rule runs once a shape
def sum_partials_config(n: int, vectors: int, sms: int) -> triton.Config:
    """The partial sums' reduction: columns per program halved from 256 (to 32 at least) until the programs
    (column blocks x gradients) fill two waves, and as many partial rows per step as _SUM_STEP_ELEMS allows.
    With 256 columns a program, rows of 4096 gave 16 programs walking 512 rows each, one dependent load
    after another: 12 µs a gradient on an H100 where its 8 MB read takes under 3."""
    block_c = 256
    while block_c > 32 and triton.cdiv(n, block_c) * vectors < 2 * sms:
        block_c //= 2
    if INTERPRET:
        block_c = min(block_c, 64)
    block_p = 16 if INTERPRET else _SUM_STEP_ELEMS // block_c
    return triton.Config({"BLOCK_P": block_p, "BLOCK_C": block_c}, num_warps=4, num_stages=1 if INTERPRET else 3)


_BWD_KEY = ["N", "IS_RMS", "HAS_W", "HAS_GELU", "NEED_DW", "NEED_DB", "NEED_DXB"]


def _per_band(kernel, configs: list[triton.Config], prune) -> list[TurnTuner]:
    """One tuner per band of rows per SM, as for the forward."""
    return [TurnTuner(kernel, configs, key=_BWD_KEY, prune=prune) for _ in range(len(ROWS_PER_SM_BANDS) + 1)]


_whole_row_tuned = _per_band(_whole_row_bwd_kernel, whole_row_configs(), prune_whole_row_configs)
_split_row_tuned = _per_band(_whole_row_bwd_kernel, tuned_split_row_configs(), prune_whole_row_configs)
_row_sums_tuned = TurnTuner(_row_sums_kernel, chunk_configs(), key=_BWD_KEY[:4], prune=prune_chunk_configs)
_chunk_tuned = _per_band(_chunk_bwd_kernel, chunk_configs(), prune_chunk_configs)


# ----------------------------------------------------------------------------------------------------------
# Launcher
# ----------------------------------------------------------------------------------------------------------


def _tuned_path(block_n: int, has_gelu: bool) -> str:
    """The launch the tuners take for rows of BLOCK_N: "whole-row", "split-row" or "two-pass"."""
    if block_n <= MAX_WHOLE_ROW_BLOCK:
        return "whole-row"
    return "split-row" if block_n <= MAX_SPLIT_ROW_BLOCK and not has_gelu else "two-pass"


@functools.cache
def _most_slots(n_rows: int, block_n: int, sms: int) -> int:
    """The most slots any candidate the tuner keeps for this shape launches: rows of partial sums to hold."""
    configs = whole_row_configs() if block_n <= MAX_WHOLE_ROW_BLOCK else tuned_split_row_configs()
    kept = prune_whole_row_configs(configs, {"n_rows": n_rows}, BLOCK_N=block_n)
    return max(_whole_row_slots(c.kwargs, n_rows, sms) for c in kept)


def _whole_row_slots(meta: dict, n_rows: int, sms: int) -> int:
    """Programs walking their own tiles (each SPLIT programs side by side): CTAS programs per SM, but no more
    than one per tile, nor (beyond one per SM) than would leave a program fewer than _MIN_ROWS_PER_PROGRAM
    rows."""
    enough_rows = max(sms, triton.cdiv(n_rows, _MIN_ROWS_PER_PROGRAM))
    resident = max(1, sms * meta["CTAS"] // meta["SPLIT"])
    return min(triton.cdiv(n_rows, meta["ROWS"]), resident, enough_rows)


def _row_groups(n_rows: int, sms: int) -> int:
    """Groups of rows of the chunk kernel: at most two per SM, of at least _MIN_ROWS_PER_PROGRAM rows."""
    return max(1, min(triton.cdiv(n_rows, _MIN_ROWS_PER_PROGRAM), 2 * sms))


def _rows_of(t: torch.Tensor, n: int) -> torch.Tensor:
    """t as (rows, n) with a unit last stride, copied only if it has none (a gradient may arrive expanded)."""
    t2 = t.reshape(-1, n)
    return t2 if t2.stride(-1) == 1 or n == 1 else t2.contiguous()


def norm_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    gelu_bias: torch.Tensor | None,
    mean: torch.Tensor | None,
    rstd: torch.Tensor,
    is_rms: bool,
    *,
    need_dw: bool,
    db_dtype: torch.dtype | None,
    need_dxb: bool,
    gelu_impl: int,
    config: triton.Config | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """dx, dweight, dbias (of dtype `db_dtype`, None for none) and the GELU bias's gradient, from the output's
    gradient dy and what the forward saved: x, weight, gelu_bias (the fused op's) and the rows' mean (None for
    RMSNorm) and rstd. Gradients not asked for are None. `config` forces a `whole_row_config` or a
    `chunk_config` (the two-pass kernels) instead of the tuners' picks."""
    n = x.shape[-1]
    x2 = x.view(-1, n)
    n_rows = x2.shape[0]
    need_dw = need_dw and weight is not None
    need_dxb = need_dxb and gelu_bias is not None
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    grads = {
        "W": (weight.dtype if need_dw else None),
        "B": db_dtype,
        "XB": (gelu_bias.dtype if need_dxb else None),
    }
    if n_rows == 0:
        empty = {k: None if d is None else torch.zeros(n, dtype=d, device=x.device) for k, d in grads.items()}
        return dx, empty["W"], empty["B"], empty["XB"]
    dy2 = _rows_of(dy, n)
    dx2 = dx.view(-1, n)
    block_n = next_pow2(n)
    sms = num_sms(x.device)
    has_gelu = gelu_bias is not None
    two_pass = _tuned_path(block_n, has_gelu) == "two-pass" if config is None else "CHUNK" in config.kwargs
    flags = {
        "IS_RMS": is_rms,
        "HAS_W": weight is not None,
        "HAS_GELU": has_gelu,
        "GELU_IMPL": gelu_impl,
        "PRECISE": x.dtype == torch.float32,  # the forward's GELU fit, so h is recomputed bit for bit
        # Hand-written PTX as in the forward: not under the interpreter, nor for tiles under 256 wide.
        "INLINE_PTX": not INTERPRET and (config.kwargs["CHUNK"] if two_pass and config else block_n) >= 256,
        "BLOCK_N": block_n,
        "EVEN_N": n == block_n,
    }
    need = {"NEED_DW": grads["W"] is not None, "NEED_DB": grads["B"] is not None, "NEED_DXB": need_dxb}
    if two_pass:
        parts = _row_groups(n_rows, sms)
    elif config is None:
        parts = _most_slots(n_rows, block_n, sms)
    else:
        parts = _whole_row_slots(config.kwargs, n_rows, sms)
    # One (programs, n) fp32 buffer of partial sums per gradient asked for, slices of one allocation that a
    # single launch reduces; absent ones become x (never used).
    asked = [k for k, d in grads.items() if d]
    stacked = torch.empty((len(asked), parts, n), dtype=torch.float32, device=x.device)
    partials = dict(zip(asked, stacked))
    ptrs = [partials.get(k, x2) for k in ("W", "B", "XB")]
    vectors = (x2 if weight is None else weight, x2 if gelu_bias is None else gelu_bias)
    stats = (rstd if mean is None else mean, rstd)
    if two_pass:
        launches = _two_pass(x2, dy2, dx2, vectors, stats, ptrs, parts, flags, need, config, sms)
    else:
        launches = _whole_row(x2, dy2, dx2, vectors, stats, ptrs, flags, need, config, sms)
        parts = _whole_row_slots(launches[0][0].kwargs, n_rows, sms)
    note_launch("norm-bwd", *launches[0], *launches[1:])
    out = {k: torch.empty(n, dtype=grads[k], device=x.device) for k in asked}
    if asked:
        targets = [out[k] for k in asked]
        targets += [targets[0]] * (3 - len(targets))  # stand-ins, never stored to
        cfg = sum_partials_config(n, len(asked), sms)
        grid = (triton.cdiv(n, cfg.kwargs["BLOCK_C"]), len(asked))
        _sum_partials_kernel[grid](stacked, *targets, parts, n, stacked.stride(0), **cfg.all_kwargs())
    return dx, out.get("W"), out.get("B"), out.get("XB")


def _whole_row(x2, dy2, dx2, vectors, stats, ptrs, flags, need, config, sms) -> list[tuple[triton.Config, str]]:
    n_rows, n = x2.shape

    def grid(meta: dict) -> tuple[int]:
        return (_whole_row_slots(meta, n_rows, sms) * meta["SPLIT"],)

    # The tuners' lists hold no exchanging candidate (they measured slower): only a forced one needs a mailbox.
    exchange = config is not None and config.kwargs["EXCHANGE"]
    if exchange and INTERPRET:
        raise ValueError("programs that exchange row sums wait on each other; the interpreter runs one at a time")
    mailbox = _exchange_buffers(grid(config.kwargs)[0], x2) if exchange else (x2, x2)
    args = (x2, dy2, dx2, *vectors, *stats, *ptrs, *mailbox, n_rows, n, x2.stride(0), dy2.stride(0), dx2.stride(0))
    if config is None:
        tuners = _whole_row_tuned if flags["BLOCK_N"] <= MAX_WHOLE_ROW_BLOCK else _split_row_tuned
        tuner = tuners[rows_per_sm_band(n_rows, sms)]
        tuner[grid](*args, **flags, **need)
        config = tuner.best_config
    else:
        split = config.kwargs["SPLIT"]
        if flags["BLOCK_N"] > MAX_WHOLE_ROW_BLOCK * split:
            raise ValueError(
                f"rows of {n} do not fit the whole-row backward split {split} ways"
                f" (at most {MAX_WHOLE_ROW_BLOCK} columns a program)"
            )
        if split > flags["BLOCK_N"]:
            raise ValueError(f"rows of {n} cannot be split {split} ways")
        _whole_row_bwd_kernel[grid(config.kwargs)](*args, **flags, **need, **config.all_kwargs())
    return [(config, "whole-row")]


def _exchange_buffers(programs: int, x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sums and Counts of a launch whose programs exchange row sums: two boxes of two fp32 sums and one zeroed
    counter per program."""
    sums = torch.empty(programs * 4, dtype=torch.float32, device=x2.device)
    return sums, torch.zeros(programs, dtype=torch.int32, device=x2.device)


def _two_pass(x2, dy2, dx2, vectors, stats, ptrs, groups, flags, need, config, sms) -> list[tuple[triton.Config, str]]:
    n_rows, n = x2.shape
    if config is not None and config.kwargs["CHUNK"] > flags["BLOCK_N"]:
        raise ValueError(f"a chunk of {config.kwargs['CHUNK']} is wider than rows of {n}")
    row_means = torch.empty((2, n_rows), dtype=torch.float32, device=x2.device)  # mean(g), mean(g * xhat)
    sums_args = (x2, dy2, *vectors, *stats, row_means[0], row_means[1], n, x2.stride(0), dy2.stride(0))
    if config is None:
        _row_sums_tuned[lambda meta: (n_rows,)](*sums_args, **flags)
        sums_config = _row_sums_tuned.best_config
    else:
        sums_config = config
        _row_sums_kernel[(n_rows,)](*sums_args, **flags, **config.all_kwargs())

    group_rows = triton.cdiv(n_rows, groups)
    args = (
        x2, dy2, dx2, *vectors, *stats, row_means[0], row_means[1], *ptrs, n_rows, n, group_rows,
        x2.stride(0), dy2.stride(0), dx2.stride(0),
    )  # fmt: skip

    def grid(meta: dict) -> tuple[int]:
        return (triton.cdiv(n, meta["CHUNK"]) * groups,)

    if config is None:
        tuner = _chunk_tuned[rows_per_sm_band(n_rows, sms)]
        tuner[grid](*args, **flags, **need)
        config = tuner.best_config
    else:
        _chunk_bwd_kernel[grid(config.kwargs)](*args, **flags, **need, **config.all_kwargs())
    return [(sums_config, "two-pass row sums"), (config, "two-pass chunks")]
