"""FlashAttention-2 backward of `attention`, layout (batch, heads, seq, head_dim), fp16/bf16.

The forward saves O and each query row's log-sum-exp of the scaled scores, LSE (fp32, natural log), never
the probabilities: P = exp(scale * q k^T - LSE) is recomputed tile by tile on chip. Three kernels:
1. preprocess: delta = rowsum(dO * O) per query row (fp32), the softmax's correction term.
2. dK/dV: one program per (BLOCK_N keys, batch, K/V head) keeps its K and V tiles and fp32 accumulators
   while it walks the query blocks: dV += P^T dO, dK += dS^T Q, with dS = P * (dO V^T - delta).
3. dQ: one program per (BLOCK_M queries, batch, query head) walks the key blocks: dQ += dS K.
By default two passes rather than one kernel that adds dQ with atomics: every gradient element is written
once, by one program, in a fixed order, so the gradients are the same from run to run, and no fp32 dQ buffer
and cast are needed; the price is computing Q K^T and dO V^T twice (seven products a tile pair against five).
`atomic_dq=True` takes the one pass instead, as FlashAttention-2 and later do: the dK/dV program also forms
dS K for each query block it walks and adds it into an fp32 dQ buffer with atomics (kernel 2 then ends the
work; a last kernel scales and rounds the buffer into dQ). The sums then land in whatever order the programs
run, so dQ may differ in its last bits from run to run. On an H100 it ran within 7% of the two passes
either way (D128, S 4096 and 16384; docs/performance.md): the atomics cost about what the recomputation
saves, so it is an option, not the default.

`tma=True` reads the streamed tiles (Q and dO in kernel 2, K and V in kernel 3) through TMA descriptors each
program makes for its head, and the one pass's dQ shares go out by TMA's bulk reduction from shared memory
instead of per-thread atomics, into sums kept transposed (head_dim rows of queries, each padded to 16 bytes)
so that the K^T dS product's tile goes out as it is; the interpreter, which has no TMA reduction, adds the
same transposed sums by atomics. By default (`tma=None`) the two passes take TMA on a Hopper-or-newer GPU
wherever `tma_fits`, and the one pass never: side by side on an H100 (bf16, D128, S 4096 and 16384, causal and
not; docs/performance.md) the two passes through TMA ran 0.99-1.16x the plain ones (1.09x causal S 4096,
1.16x non-causal S 16384), the one pass through TMA 0.91-0.99x its plain build (its 8-warp TMA builds spill).

Grouped K/V heads: query head h reads K/V head h // group, and the dK/dV program of a K/V head sums over its
group's query heads (`group`; 1 = one K/V head per query head, all the forward runs today).

causal is top-left aligned (query i sees keys <= i, S_q == S_k) as in the forward: the dK/dV program masks
only the query blocks across the diagonal and skips those above it; the dQ program masks only its diagonal
key blocks and skips those right of it. Rows past a length read as zeros, so they add nothing (P is 1 there,
finite, and meets zero dO and Q); keys past S_k are masked in dQ's last block. Without TMA, loads are plain
pointer loads (any strides with a unit last stride): the configs are Triton autotune candidates, one small config
under the interpreter, not yet measured on a GPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._common import INTERPRET, ensure_allocator, has_tma, note_launch, round_to, tma_compatible

_LOG2E = 1.4426950408889634
_LOG2E_IN_KERNEL = tl.constexpr(_LOG2E)
_INTERPRET_IN_KERNEL = tl.constexpr(INTERPRET)

# ----------------------------------------------------------------------------------------------------------
# Configs
# ----------------------------------------------------------------------------------------------------------

# fp32 registers per thread that the accumulators (dK and dV, or dQ) and the two score tiles (P, dS) may
# take (beyond it ptxas spilled on sm_90), and shared memory per program.
_MAX_TILE_REGS = 160
# The one pass's partial dQ tile is formed and added out at once (not live across the loop), so its budget
# counts it in full but allows more: the largest candidate that compiled without spilling on sm_90.
_MAX_ONE_PASS_REGS = 176
_MAX_SMEM = 200 * 1024
_PREPROCESS_BLOCK = 16 if INTERPRET else 64
_DQ_FROM_SUMS_BLOCK = 1024
_DQ_FROM_TRANSPOSED_ROWS = 16 if INTERPRET else 64


def bwd_config(block_m: int, block_n: int, warps: int, stages: int) -> triton.Config:
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n}, num_warps=warps, num_stages=stages)


def dkdv_configs() -> list[triton.Config]:
    """dK/dV candidates: BLOCK_N keys per program (a multiple of BLOCK_M, the query blocks it walks)."""
    if INTERPRET:
        return [bwd_config(16, 32, 4, 1)]
    return [
        bwd_config(32, 128, 8, 3),
        bwd_config(64, 128, 8, 2),
        bwd_config(32, 64, 4, 3),
        bwd_config(64, 64, 4, 2),
        bwd_config(16, 64, 4, 4),
        bwd_config(16, 32, 4, 2),  # what fits head_dim 256
    ]


def dq_configs() -> list[triton.Config]:
    """dQ candidates: BLOCK_M queries per program (a multiple of BLOCK_N, the key blocks it walks)."""
    if INTERPRET:
        return [bwd_config(32, 16, 4, 1)]
    return [
        bwd_config(128, 32, 8, 3),
        bwd_config(128, 64, 8, 2),
        bwd_config(64, 32, 4, 3),
        bwd_config(64, 64, 4, 2),
        bwd_config(32, 32, 4, 2),  # what fits head_dim 256
    ]


def dkdv_dq_configs() -> list[triton.Config]:
    """Candidates of the one-pass dK/dV program that also adds dQ (`atomic_dq`): its dS K partial (BLOCK_M x
    HEAD_DIM fp32) lives beside the two accumulators, so the query blocks are smaller or the warps more."""
    if INTERPRET:
        return [bwd_config(16, 32, 4, 1)]
    return [
        bwd_config(64, 128, 8, 2),
        bwd_config(32, 128, 8, 3),
        bwd_config(16, 128, 8, 4),
        bwd_config(32, 64, 4, 3),
        bwd_config(16, 64, 4, 4),
        bwd_config(16, 32, 4, 2),  # what fits head_dim 256
    ]


def _prune(
    configs: list[triton.Config], head_dim: int, resident: str, seq: int, dq_partial: bool = False
) -> list[triton.Config]:
    # resident: the block a program keeps ("BLOCK_N" for dK/dV, "BLOCK_M" for dQ); the other one streams.
    if len(configs) <= 1:
        return configs
    streamed = "BLOCK_M" if resident == "BLOCK_N" else "BLOCK_N"
    accumulators = 2 if resident == "BLOCK_N" else 1
    kept = []
    for cfg in configs:
        r, s = cfg.kwargs[resident], cfg.kwargs[streamed]
        smem = (2 * r + 2 * s * cfg.num_stages) * head_dim * 2  # resident tiles + streamed ones per stage
        partial = s * head_dim if dq_partial else 0  # the one pass's dS K tile
        regs = (accumulators * r * head_dim + 2 * r * s + partial) // (32 * cfg.num_warps)
        limit = _MAX_ONE_PASS_REGS if dq_partial else _MAX_TILE_REGS
        if smem > _MAX_SMEM or regs > limit or r % s or r > max(64, triton.next_power_of_2(seq)):
            continue
        kept.append(cfg)
    return kept or [min(configs, key=lambda c: c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"])]


def prune_dkdv_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    return _prune(configs, kwargs["HEAD_DIM"], "BLOCK_N", named_args["SK"])


def prune_dkdv_dq_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    return _prune(configs, kwargs["HEAD_DIM"], "BLOCK_N", named_args["SK"], dq_partial=True)


def prune_dq_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    return _prune(configs, kwargs["HEAD_DIM"], "BLOCK_M", named_args["SQ"])


# ----------------------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------------------


@triton.jit
def _operand(x, DTYPE: tl.constexpr, UPCAST: tl.constexpr):
    # An fp32 tile as a tensor-core operand: rounded to the inputs' dtype; widened again under the
    # interpreter for bf16 (its bf16 dot is wrong).
    x = round_to(x, DTYPE)
    if UPCAST:
        x = x.to(tl.float32)
    return x


@triton.jit
def _load_rows(base, rows, n_rows, stride, HEAD_DIM: tl.constexpr, UPCAST: tl.constexpr):
    # A (rows, HEAD_DIM) tile; rows past n_rows read as zeros.
    offs_d = tl.arange(0, HEAD_DIM)
    t = tl.load(base + rows.to(tl.int64)[:, None] * stride + offs_d[None, :], mask=(rows < n_rows)[:, None], other=0.0)
    if UPCAST:
        t = t.to(tl.float32)
    return t


@triton.jit
def _tile(
    src, start, n_rows, stride, BLOCK: tl.constexpr, HEAD_DIM: tl.constexpr, UPCAST: tl.constexpr, TMA: tl.constexpr
):
    # Rows start .. start + BLOCK of a head: through its TMA descriptor (TMA) or its base pointer; rows past
    # n_rows read as zeros either way.
    if TMA:
        t = src.load([start, 0])
        if UPCAST:
            t = t.to(tl.float32)
    else:
        t = _load_rows(src, start + tl.arange(0, BLOCK), n_rows, stride, HEAD_DIM, UPCAST)
    return t


@triton.jit
def _rows_source(base, n_rows, stride, BLOCK: tl.constexpr, HEAD_DIM: tl.constexpr, TMA: tl.constexpr):
    # What _tile reads a head's (n_rows, HEAD_DIM) rows from: a descriptor made on the device, or the pointer.
    if TMA:
        return tl.make_tensor_descriptor(base, [n_rows, HEAD_DIM], [stride, 1], [BLOCK, HEAD_DIM])
    else:
        return base


@triton.jit
def _store_rows(base, rows, n_rows, stride, t, HEAD_DIM: tl.constexpr):
    offs_d = tl.arange(0, HEAD_DIM)
    ptrs = base + rows.to(tl.int64)[:, None] * stride + offs_d[None, :]
    tl.store(ptrs, round_to(t, base.dtype.element_ty), mask=(rows < n_rows)[:, None])


@triton.jit
def _head_base(ptr, b, h, stride_b, stride_h):
    return ptr + b.to(tl.int64) * stride_b + h.to(tl.int64) * stride_h


@triton.jit
def _preprocess_kernel(
    Out,
    DO,
    Delta,
    H,
    SQ,
    stride_ob,
    stride_oh,
    stride_os,
    stride_dob,
    stride_doh,
    stride_dos,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    n_m = tl.cdiv(SQ, BLOCK_M)
    bh = tl.program_id(0) // n_m
    rows = (tl.program_id(0) - bh * n_m) * BLOCK_M + tl.arange(0, BLOCK_M)
    b = bh // H
    h = bh - b * H
    o = _load_rows(_head_base(Out, b, h, stride_ob, stride_oh), rows, SQ, stride_os, HEAD_DIM, False)
    do = _load_rows(_head_base(DO, b, h, stride_dob, stride_doh), rows, SQ, stride_dos, HEAD_DIM, False)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    tl.store(Delta + bh.to(tl.int64) * SQ + rows, delta, mask=rows < SQ)


@triton.jit
def _dkdv_inner(
    dk,
    dv,
    k,
    v,
    q_base,
    do_base,
    lse_base,
    delta_base,
    dq_dest,  # this head's fp32 dQ sums, with ATOMIC_DQ: rows of HEAD_DIM, or under TMA a descriptor over
    # their transpose (HEAD_DIM rows of SQ_SUMS), which TMA reduces into
    stride_qs,
    stride_dos,
    offs_n,
    lo,
    hi,
    SQ,
    SQ_SUMS,  # the row length of the transposed dQ sums under TMA (SQ rounded up to 16 bytes)
    qk_scale,
    MASK: tl.constexpr,  # the causal mask (query blocks across the diagonal)
    ATOMIC_DQ: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    DTYPE: tl.constexpr,
    UPCAST: tl.constexpr,
    TMA: tl.constexpr,
):
    # Transposed tiles (keys x queries), so that the accumulations take P^T and dS^T as they come.
    for start_m in tl.range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q = _tile(q_base, start_m, SQ, stride_qs, BLOCK_M, HEAD_DIM, UPCAST, TMA)
        do = _tile(do_base, start_m, SQ, stride_dos, BLOCK_M, HEAD_DIM, UPCAST, TMA)
        lse = tl.load(lse_base + offs_m, mask=offs_m < SQ, other=0.0) * _LOG2E_IN_KERNEL
        delta = tl.load(delta_base + offs_m, mask=offs_m < SQ, other=0.0)
        p_t = tl.math.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])
        if MASK:
            p_t = tl.where(offs_m[None, :] >= offs_n[:, None], p_t, 0.0)
        dv = tl.dot(_operand(p_t, DTYPE, UPCAST), do, dv)
        ds_t = _operand(p_t * (tl.dot(v, tl.trans(do)) - delta[None, :]), DTYPE, UPCAST)
        dk = tl.dot(ds_t, q, dk)
        if ATOMIC_DQ:
            # This key block's share of the queries' dQ; rows past SQ are not added (their dS is not 0).
            dq_t = tl.dot(tl.trans(k), ds_t)
            offs_d = tl.arange(0, HEAD_DIM)
            if TMA:
                if _INTERPRET_IN_KERNEL:  # it has no TMA reduction: the same transposed sums by atomics
                    ptrs = dq_dest + offs_d.to(tl.int64)[:, None] * SQ_SUMS + offs_m[None, :]
                    tl.atomic_add(ptrs, dq_t, mask=(offs_m < SQ)[None, :], sem="relaxed")
                else:  # one bulk reduction from shared memory; the descriptor drops columns past SQ
                    dq_dest.atomic_add([0, start_m], dq_t)
            else:
                ptrs = dq_dest + offs_m.to(tl.int64)[None, :] * HEAD_DIM + offs_d[:, None]
                tl.atomic_add(ptrs, dq_t, mask=(offs_m < SQ)[None, :], sem="relaxed")
    return dk, dv


@triton.jit
def _dkdv_kernel(
    Q,
    K,
    V,
    DO,
    LSE,
    Delta,
    DK,
    DV,
    DQ_SUMS,  # fp32 zeros with ATOMIC_DQ: (B, H, SQ, HEAD_DIM), under TMA (B, H, HEAD_DIM, SQ_SUMS)
    H,  # query heads
    H_KV,  # K/V heads = H // GROUP
    GROUP,
    SQ,
    SK,
    SQ_SUMS,  # the dQ sums' row length: SQ, or under TMA SQ rounded up to 16 bytes
    stride_qb,
    stride_qh,
    stride_qs,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_vb,
    stride_vh,
    stride_vs,
    stride_dob,
    stride_doh,
    stride_dos,
    stride_dkb,
    stride_dkh,
    stride_dks,
    stride_dvb,
    stride_dvh,
    stride_dvs,
    qk_scale,  # softmax scale * log2(e)
    sm_scale,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST: tl.constexpr,
    ATOMIC_DQ: tl.constexpr,
    TMA: tl.constexpr,  # the streamed tiles (and the one pass's dQ sums) through TMA descriptors
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    tl.static_assert(BLOCK_N % BLOCK_M == 0, "the causal split needs BLOCK_N % BLOCK_M == 0")
    # A 1-D grid, K/V head after K/V head; under causal the first key blocks see the most queries and
    # come first already.
    n_n = tl.cdiv(SK, BLOCK_N)
    bh = tl.program_id(0) // n_n
    start_n = (tl.program_id(0) - bh * n_n) * BLOCK_N
    b = bh // H_KV
    h_kv = bh - b * H_KV
    offs_n = start_n + tl.arange(0, BLOCK_N)
    k = _load_rows(_head_base(K, b, h_kv, stride_kb, stride_kh), offs_n, SK, stride_ks, HEAD_DIM, UPCAST)
    v = _load_rows(_head_base(V, b, h_kv, stride_vb, stride_vh), offs_n, SK, stride_vs, HEAD_DIM, UPCAST)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    DTYPE: tl.constexpr = Q.dtype.element_ty
    for g in tl.range(0, GROUP):
        h = h_kv * GROUP + g
        q_base = _rows_source(_head_base(Q, b, h, stride_qb, stride_qh), SQ, stride_qs, BLOCK_M, HEAD_DIM, TMA)
        do_base = _rows_source(_head_base(DO, b, h, stride_dob, stride_doh), SQ, stride_dos, BLOCK_M, HEAD_DIM, TMA)
        q_head = b.to(tl.int64) * H + h
        row0 = q_head * SQ
        dq_base = DQ_SUMS + q_head * HEAD_DIM * SQ_SUMS  # either layout: SQ_SUMS is SQ without TMA
        if TMA:
            if ATOMIC_DQ:
                if not _INTERPRET_IN_KERNEL:
                    dq_base = tl.make_tensor_descriptor(dq_base, [HEAD_DIM, SQ], [SQ_SUMS, 1], [HEAD_DIM, BLOCK_M])
        if CAUSAL:
            # Query blocks across the diagonal, masked; then every later query sees the whole key block.
            diagonal_end = tl.minimum(start_n + BLOCK_N, SQ)
            dk, dv = _dkdv_inner(
                dk, dv, k, v, q_base, do_base, LSE + row0, Delta + row0, dq_base, stride_qs, stride_dos,
                offs_n, start_n, diagonal_end, SQ, SQ_SUMS, qk_scale, True, ATOMIC_DQ, HEAD_DIM, BLOCK_M, DTYPE, UPCAST,
                TMA,
            )  # fmt: skip
            dk, dv = _dkdv_inner(
                dk, dv, k, v, q_base, do_base, LSE + row0, Delta + row0, dq_base, stride_qs, stride_dos,
                offs_n, diagonal_end, SQ, SQ, SQ_SUMS, qk_scale, False, ATOMIC_DQ, HEAD_DIM, BLOCK_M, DTYPE, UPCAST,
                TMA,
            )  # fmt: skip
        else:
            dk, dv = _dkdv_inner(
                dk, dv, k, v, q_base, do_base, LSE + row0, Delta + row0, dq_base, stride_qs, stride_dos,
                offs_n, 0, SQ, SQ, SQ_SUMS, qk_scale, False, ATOMIC_DQ, HEAD_DIM, BLOCK_M, DTYPE, UPCAST, TMA,
            )  # fmt: skip
    _store_rows(_head_base(DK, b, h_kv, stride_dkb, stride_dkh), offs_n, SK, stride_dks, dk * sm_scale, HEAD_DIM)
    _store_rows(_head_base(DV, b, h_kv, stride_dvb, stride_dvh), offs_n, SK, stride_dvs, dv, HEAD_DIM)


@triton.jit
def _dq_inner(
    dq,
    q,
    do,
    lse,
    delta,
    k_base,
    v_base,
    stride_ks,
    stride_vs,
    offs_m,
    lo,
    hi,
    SK,
    qk_scale,
    MASK: tl.constexpr,  # 0: none, 1: causal diagonal, 2: keys past SK
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DTYPE: tl.constexpr,
    UPCAST: tl.constexpr,
    TMA: tl.constexpr,
):
    for start_n in tl.range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = _tile(k_base, start_n, SK, stride_ks, BLOCK_N, HEAD_DIM, UPCAST, TMA)
        v = _tile(v_base, start_n, SK, stride_vs, BLOCK_N, HEAD_DIM, UPCAST, TMA)
        p = tl.math.exp2(tl.dot(q, tl.trans(k)) * qk_scale - lse[:, None])
        if MASK == 1:
            p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        elif MASK == 2:  # a zero key scores 0, so its P is not 0 (and not bounded by 1): masked
            p = tl.where((offs_n < SK)[None, :], p, 0.0)
        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
        dq = tl.dot(_operand(ds, DTYPE, UPCAST), k, dq)
    return dq


@triton.jit
def _dq_kernel(
    Q,
    K,
    V,
    DO,
    LSE,
    Delta,
    DQ,
    H,
    GROUP,
    SQ,
    SK,
    stride_qb,
    stride_qh,
    stride_qs,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_vb,
    stride_vh,
    stride_vs,
    stride_dob,
    stride_doh,
    stride_dos,
    stride_dqb,
    stride_dqh,
    stride_dqs,
    qk_scale,
    sm_scale,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST: tl.constexpr,
    EVEN_N: tl.constexpr,  # SK % BLOCK_N == 0
    TMA: tl.constexpr,  # the streamed K/V tiles through TMA descriptors
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    tl.static_assert(BLOCK_M % BLOCK_N == 0, "the causal split needs BLOCK_M % BLOCK_N == 0")
    n_m = tl.cdiv(SQ, BLOCK_M)
    bh = tl.program_id(0) // n_m
    start_m = tl.program_id(0) - bh * n_m
    if CAUSAL:  # the last query blocks see the most keys: start them first
        start_m = n_m - 1 - start_m
    b = bh // H
    h = bh - b * H
    h_kv = h // GROUP
    off_m = start_m * BLOCK_M
    offs_m = off_m + tl.arange(0, BLOCK_M)
    q_base = _head_base(Q, b, h, stride_qb, stride_qh)
    q = _load_rows(q_base, offs_m, SQ, stride_qs, HEAD_DIM, UPCAST)
    do = _load_rows(_head_base(DO, b, h, stride_dob, stride_doh), offs_m, SQ, stride_dos, HEAD_DIM, UPCAST)
    row0 = bh.to(tl.int64) * SQ
    lse = tl.load(LSE + row0 + offs_m, mask=offs_m < SQ, other=0.0) * _LOG2E_IN_KERNEL
    delta = tl.load(Delta + row0 + offs_m, mask=offs_m < SQ, other=0.0)
    k_base = _rows_source(_head_base(K, b, h_kv, stride_kb, stride_kh), SK, stride_ks, BLOCK_N, HEAD_DIM, TMA)
    v_base = _rows_source(_head_base(V, b, h_kv, stride_vb, stride_vh), SK, stride_vs, BLOCK_N, HEAD_DIM, TMA)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    DTYPE: tl.constexpr = Q.dtype.element_ty
    if CAUSAL:
        # Keys left of this query block: all visible. Then the diagonal blocks, masked.
        dq = _dq_inner(
            dq, q, do, lse, delta, k_base, v_base, stride_ks, stride_vs, offs_m, 0, off_m, SK, qk_scale, 0,
            HEAD_DIM, BLOCK_N, DTYPE, UPCAST, TMA,
        )  # fmt: skip
        dq = _dq_inner(
            dq, q, do, lse, delta, k_base, v_base, stride_ks, stride_vs, offs_m, off_m,
            tl.minimum(off_m + BLOCK_M, SK), SK, qk_scale, 1, HEAD_DIM, BLOCK_N, DTYPE, UPCAST, TMA,
        )  # fmt: skip
    elif EVEN_N:
        dq = _dq_inner(
            dq, q, do, lse, delta, k_base, v_base, stride_ks, stride_vs, offs_m, 0, SK, SK, qk_scale, 0,
            HEAD_DIM, BLOCK_N, DTYPE, UPCAST, TMA,
        )  # fmt: skip
    else:
        full = (SK // BLOCK_N) * BLOCK_N
        dq = _dq_inner(
            dq, q, do, lse, delta, k_base, v_base, stride_ks, stride_vs, offs_m, 0, full, SK, qk_scale, 0,
            HEAD_DIM, BLOCK_N, DTYPE, UPCAST, TMA,
        )  # fmt: skip
        dq = _dq_inner(
            dq, q, do, lse, delta, k_base, v_base, stride_ks, stride_vs, offs_m, full, SK, SK, qk_scale, 2,
            HEAD_DIM, BLOCK_N, DTYPE, UPCAST, TMA,
        )  # fmt: skip
    _store_rows(_head_base(DQ, b, h, stride_dqb, stride_dqh), offs_m, SQ, stride_dqs, dq * sm_scale, HEAD_DIM)


@triton.jit
def _dq_from_sums_kernel(Sums, DQ, n, sm_scale, BLOCK: tl.constexpr):
    # The one pass's fp32 sums, scaled and rounded into dQ (both contiguous, the same shape).
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(Sums + offs, mask=offs < n, other=0.0)
    tl.store(DQ + offs, round_to(x * sm_scale, DQ.dtype.element_ty), mask=offs < n)


@triton.jit
def _dq_from_transposed_sums_kernel(Sums, DQ, SQ, SQ_SUMS, sm_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    # The same from TMA's layout: each head's sums are (HEAD_DIM, SQ_SUMS); dQ is contiguous (B, H, SQ, D).
    n_m = tl.cdiv(SQ, BLOCK_M)
    bh = (tl.program_id(0) // n_m).to(tl.int64)
    rows = (tl.program_id(0) % n_m) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    x = tl.load(Sums + bh * HEAD_DIM * SQ_SUMS + offs_d[None, :] * SQ_SUMS + rows[:, None], mask=(rows < SQ)[:, None])
    dq = DQ + bh * SQ * HEAD_DIM + rows.to(tl.int64)[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(dq, round_to(x * sm_scale, DQ.dtype.element_ty), mask=(rows < SQ)[:, None])


_dkdv_tuned = triton.autotune(
    configs=dkdv_configs(),
    key=["SQ", "SK", "HEAD_DIM", "CAUSAL", "GROUP", "TMA"],
    prune_configs_by={"early_config_prune": prune_dkdv_configs},
)(_dkdv_kernel)

_dkdv_dq_tuned = triton.autotune(
    configs=dkdv_dq_configs(),
    key=["SQ", "SK", "HEAD_DIM", "CAUSAL", "GROUP", "TMA"],
    prune_configs_by={"early_config_prune": prune_dkdv_dq_configs},
    reset_to_zero=["DQ_SUMS"],  # each timed candidate adds into the buffer: start it from zeros
)(_dkdv_kernel)

_dq_tuned = triton.autotune(
    configs=dq_configs(),
    key=["SQ", "SK", "HEAD_DIM", "CAUSAL", "GROUP", "TMA"],
    prune_configs_by={"early_config_prune": prune_dq_configs},
)(triton.heuristics({"EVEN_N": lambda args: args["SK"] % args["BLOCK_N"] == 0})(_dq_kernel))


# ----------------------------------------------------------------------------------------------------------
# Launcher
# ----------------------------------------------------------------------------------------------------------


def _unit_last_stride(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def tma_fits(*tensors: torch.Tensor) -> bool:
    """Whether each (B, H, S, D) tensor can be read through per-head TMA descriptors: a unit last stride, its
    base address and its batch, head and row strides in bytes multiples of 16."""
    return all(tma_compatible(t) for t in tensors)


def takes_tma(one_pass: bool, *tensors: torch.Tensor) -> bool:
    """The default of `attention_backward`'s `tma`: the two passes on a GPU that has TMA (sm_90 and newer),
    where every input fits it; never the one pass, nor under the interpreter (its tests ask for each)."""
    return not one_pass and has_tma(tensors[0].device) and tma_fits(*tensors)


def attention_backward(
    do: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
    causal: bool,
    scale: float,
    *,
    group: int = 1,
    need_dq: bool = True,
    need_dkdv: bool = True,
    atomic_dq: bool = False,
    tma: bool | None = None,
    dkdv_config: triton.Config | None = None,
    dq_config: triton.Config | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """dq, dk, dv (None where not asked for) from the output's gradient `do` and what the forward saved: q, k,
    v (B, H // group, S_k, D), o and lse ((B, H, S_q) fp32, natural-log log-sum-exp of the scaled scores).
    No validation beyond the head grouping. `atomic_dq`: one pass that adds dQ with atomics where dq and dk/dv
    are both asked for (the module's docstring says what it trades). `tma`: the streamed tiles through TMA
    descriptors made on the device, and the one pass's dQ sums added by TMA's bulk reduction (True: an error
    where `tma_fits` does not hold; None: `takes_tma`'s choice). `dkdv_config`/`dq_config` (`bwd_config`)
    bypass the autotuners (`dkdv_config` is the one pass's config under `atomic_dq`)."""
    b, h, sq, d = q.shape
    h_kv, sk = k.shape[1], k.shape[2]
    if group < 1 or h != h_kv * group:
        raise ValueError(f"attention backward: {h} query heads do not make groups of {group} over {h_kv} K/V heads")
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device) if need_dq else None
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device) if need_dkdv else None
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device) if need_dkdv else None
    if b * h == 0 or not (need_dq or need_dkdv):
        return dq, dk, dv
    do = _unit_last_stride(do)
    one_pass = atomic_dq and need_dq and need_dkdv
    if tma is None:
        tma = takes_tma(one_pass, q, k, v, do)
    elif tma and not tma_fits(q, k, v, do):
        raise ValueError("attention backward: tma=True needs 16-byte aligned inputs and strides (tma_fits)")
    if tma:
        ensure_allocator()
    delta = torch.empty((b, h, sq), dtype=torch.float32, device=q.device)
    _preprocess_kernel[(triton.cdiv(sq, _PREPROCESS_BLOCK) * b * h,)](
        o, do, delta, h, sq, *o.stride()[:3], *do.stride()[:3], HEAD_DIM=d, BLOCK_M=_PREPROCESS_BLOCK
    )
    inputs = (q, k, v, do, lse, delta)
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *do.stride()[:3])
    consts = {"HEAD_DIM": d, "CAUSAL": causal, "UPCAST": INTERPRET and q.dtype == torch.bfloat16, "TMA": tma}
    scales = (scale * _LOG2E, scale)
    mask = "causal" if causal else "full"
    launches = []
    via = ", TMA" if tma else ""
    # TMA reduces each dQ share in its transposed layout (head_dim rows of queries, 16-byte aligned).
    sq_sums = triton.cdiv(sq, 4) * 4 if tma else sq
    if need_dkdv:
        # Without the one pass the kernel never touches the fp32 dQ sums: dk stands in for the pointer.
        sums_shape = (b, h, d, sq_sums) if tma else q.shape
        sums = torch.zeros(sums_shape, dtype=torch.float32, device=q.device) if one_pass else dk
        args = (
            *inputs, dk, dv, sums, h, h_kv, group, sq, sk, sq_sums, *strides, *dk.stride()[:3], *dv.stride()[:3],
            *scales,
        )  # fmt: skip
        tuner = _dkdv_dq_tuned if one_pass else _dkdv_tuned
        if dkdv_config is None:
            tuner[lambda meta: (triton.cdiv(sk, meta["BLOCK_N"]) * b * h_kv,)](*args, **consts, ATOMIC_DQ=one_pass)
            dkdv_config = tuner.best_config
        else:
            grid = (triton.cdiv(sk, dkdv_config.kwargs["BLOCK_N"]) * b * h_kv,)
            _dkdv_kernel[grid](*args, **consts, ATOMIC_DQ=one_pass, **dkdv_config.all_kwargs())
        launches.append((dkdv_config, f"{mask}, dk/dv" + (" + atomic dq" if one_pass else "") + via))
    if one_pass and tma:
        grid = (triton.cdiv(sq, _DQ_FROM_TRANSPOSED_ROWS) * b * h,)
        _dq_from_transposed_sums_kernel[grid](
            sums, dq, sq, sq_sums, scale, HEAD_DIM=d, BLOCK_M=_DQ_FROM_TRANSPOSED_ROWS
        )
    elif one_pass:
        n = dq.numel()
        _dq_from_sums_kernel[(triton.cdiv(n, _DQ_FROM_SUMS_BLOCK),)](sums, dq, n, scale, BLOCK=_DQ_FROM_SUMS_BLOCK)
    elif need_dq:
        args = (*inputs, dq, h, group, sq, sk, *strides, *dq.stride()[:3], *scales)
        if dq_config is None:
            _dq_tuned[lambda meta: (triton.cdiv(sq, meta["BLOCK_M"]) * b * h,)](*args, **consts)
            dq_config = _dq_tuned.best_config
        else:
            even = sk % dq_config.kwargs["BLOCK_N"] == 0
            grid = (triton.cdiv(sq, dq_config.kwargs["BLOCK_M"]) * b * h,)
            _dq_kernel[grid](*args, **consts, EVEN_N=even, **dq_config.all_kwargs())
        launches.append((dq_config, f"{mask}, dq{via}"))
    note_launch("attention-bwd", *launches[0], *launches[1:])
    return dq, dk, dv
