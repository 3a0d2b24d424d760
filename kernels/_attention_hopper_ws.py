"""Warp-specialised attention forward for Hopper (sm_90) in Gluon: the FlashAttention-3 division of labour.

Each program owns 128 query rows and runs three partitions:
- a loader warp that only issues TMA copies (Q once, then a ring of 128-key K and V blocks, STAGES deep);
- two softmax warpgroups, each owning 64 of the rows, that run `_attention_hopper`'s loop on them: issue
  QK^T of block j and P@V of block j-1, wait for QK^T, compute block j's softmax while P@V runs.

Each loop trip j of a softmax warpgroup releases K(j) and V(j-1) with one arrival on one mbarrier, at the
trip's end. A Gluon arrival comes from one thread, so the compiler holds the warpgroup at a bar.sync before
and after it; releasing K on a barrier of its own as soon as QK^T had read it made 4 per trip, this 2.
The later release leaves the loader a loop trip less lead, which a 3-deep ring gives back for non-causal
inputs (see STAGES).

Against `_attention_hopper` (one warpgroup, 64x64 tiles, the warps that compute also load) this moves the
loads off the softmax warps, shares each K/V block between 128 query rows (half the TMA and L2
traffic per score), and lets the warp schedulers overlap one warpgroup's softmax with the other's MMAs.
The register file is split with setmaxnreg: 240 per thread for the softmax warpgroups (scores, P and the
output accumulator of a 64x128 tile stay in registers), 24 for the loader's warpgroup.

The warpgroups' MMA issue is not forced to alternate ("ping-pong"): measured on an H200, through an mbarrier
pair (-3% to +2%) and through named barriers as flash-attn 4 does (-1.7% to +2.2%), it changed nothing
beyond noise, so the warp schedulers are left to interleave them.

Inputs are the packed (B*H*S, 128) rows of contiguous (B, H, S, 128) tensors whose lengths are multiples of
128; `attention.py` routes only such inputs here, on sm_90, outside the interpreter (Gluon has none).
"""

from __future__ import annotations

import functools

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from ._attention_hopper import (
    default_head_group,
    first_softmax,
    issue_scores_and_pv,
    last_pv_output,
    next_softmax,
    program_tile,
    row_descriptor,
)

WG_ROWS = 64  # query rows per softmax warpgroup (one wgmma M)
BLOCK_M = 2 * WG_ROWS  # query rows per program
BLOCK_N = 128  # keys per K/V block
SOFTMAX_WARPGROUPS = 2
SCORE_TILE = (WG_ROWS, BLOCK_N)  # (query rows, keys) of one warpgroup's scores per loop trip
HEAD_DIMS = (128,)
SEQ_MULTIPLE = 128
# K/V ring depth, causal or not. Suite runs on an H200 (head_dim 128, 16k tokens, S 4096-16384, bf16,
# against flash-attn 4 in the same rounds): non-causal, 3 stages 0.952-0.964x flash-attn 4 (two runs),
# 2 stages 0.943-0.950x (two runs); causal, 2 stages 0.945-0.969x (three runs), 3 stages 0.940-0.961x.
# Shared memory per program: Q 32 KiB, and K and V 32 KiB per stage each: 160 KiB with 2 stages, 224 KiB
# with 3; one program per SM either way.
STAGES = {False: 3, True: 2}
# Registers per thread: the softmax warpgroups get 240, the loader's warpgroup 24; the launch bound covers
# the 12 warps (3 warpgroups) of a program within the SM's 64K registers (168 x 384 threads).
SOFTMAX_REGS = 240
LOADER_REGS = 24
MAX_REGS = 168
NUM_WARPS = 12  # as launched: the default partition's 4, the other softmax warpgroup's 4, the loader's 4
# "auto" leaves causal attention shorter than this to the one-warpgroup kernel, whose 64-row blocks compute
# less of the masked half of each diagonal block. Suite runs on an H200, bf16 D128 causal, this kernel
# against the one-warpgroup one: 272 vs 304-306 TFLOP/s at S 512, 392 vs 397-400 at 1024, 504 vs 465 at 2048.
MIN_CAUSAL_SEQ = 2048


def suits(seq_q: int, causal: bool) -> bool:
    """Whether "auto" should take this kernel over the one-warpgroup one (where both apply)."""
    return not causal or seq_q >= MIN_CAUSAL_SEQ


LAUNCH_KIND = "gluon Hopper kernel, warp-specialised"  # how launch records name this kernel


@functools.cache
def launch_config(head_dim: int, causal: bool) -> triton.Config:
    """What a launch runs, for the launch records: tile, warps and K/V ring depth."""
    return triton.Config({"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N}, num_warps=NUM_WARPS, num_stages=STAGES[causal])


@gluon.jit
def _program_tile(SQ, SK, HEAD_GROUP, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    """This program's query block, batch*head and how many K/V blocks it reads (the same for all its
    partitions)."""
    start_m, bh = program_tile(SQ, BLOCK_M, HEAD_GROUP, CAUSAL)
    if CAUSAL:
        n_blocks = (start_m + 1) * (BLOCK_M // BLOCK_N)
    else:
        n_blocks = SK // BLOCK_N
    return start_m, bh, n_blocks


@gluon.jit
def _load_block(desc, row, ready, dest, free, phase, NBYTES: gl.constexpr):
    mbarrier.wait(free, phase ^ 1)  # both warpgroups released the slot (a fresh barrier passes phase 1)
    mbarrier.expect(ready, NBYTES)
    tma.async_copy_global_to_shared(desc, [row, 0], ready, dest)


@gluon.jit
def _loader(
    q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bars, k_ready, v_ready, kv_free, SQ, SK,
    HEAD_GROUP, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
):  # fmt: skip
    WG: gl.constexpr = q_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    KV_BYTES: gl.constexpr = BLOCK_N * HEAD_DIM * 2
    start_m, bh, n_blocks = _program_tile(SQ, SK, HEAD_GROUP, CAUSAL, 2 * WG, BLOCK_N)
    q_row = bh * SQ + start_m * 2 * WG
    kv_row0 = bh * SK
    for c in gl.static_range(2):
        mbarrier.expect(q_bars.index(c), WG * HEAD_DIM * 2)
        tma.async_copy_global_to_shared(q_desc, [q_row + c * WG, 0], q_bars.index(c), q_smem.index(c))
    # Block b lives in slot b % STAGES. K(b) is read a loop trip before V(b): load K(b+1) ahead of V(b).
    # K(b) and V(b-1) take the slots of K(b - STAGES) and V(b - 1 - STAGES), both released by loop trip
    # b - STAGES, whose arrivals complete kv_free[b % STAGES] for the (b // STAGES - 1)-th time.
    _load_block(k_desc, kv_row0, k_ready.index(0), k_smem.index(0), kv_free.index(0), 0, KV_BYTES)
    for b in range(1, n_blocks + 1):
        slot = b % STAGES
        phase = (b // STAGES) & 1
        if b < n_blocks:
            _load_block(k_desc, kv_row0 + b * BLOCK_N, k_ready.index(slot), k_smem.index(slot),
                        kv_free.index(slot), phase, KV_BYTES)  # fmt: skip
        prev = (b - 1) % STAGES
        _load_block(v_desc, kv_row0 + (b - 1) * BLOCK_N, v_ready.index(prev), v_smem.index(prev),
                    kv_free.index(slot), phase, KV_BYTES)  # fmt: skip


@gluon.jit
def _softmax_warpgroup(
    o_desc, q_smem, k_smem, v_smem, sink, q_bars, k_ready, v_ready, kv_free, SQ, SK, qk_scale,
    HEAD_GROUP, WARPGROUP: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
):  # fmt: skip
    WG: gl.constexpr = o_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = o_desc.block_type.shape[1]
    dtype: gl.constexpr = o_desc.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16]
    )
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    col_s: gl.constexpr = gl.SliceLayout(0, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    DIAG: gl.constexpr = 2 * WG // BLOCK_N  # key blocks that touch the diagonal of the program's rows

    start_m, bh, n_blocks = _program_tile(SQ, SK, HEAD_GROUP, CAUSAL, 2 * WG, BLOCK_N)
    first_row = start_m * 2 * WG + WARPGROUP * WG
    q_row = bh * SQ + first_row
    offs_m = first_row + gl.arange(0, WG, row_s)
    q_tile = q_smem.index(WARPGROUP)
    row_sums = sink.slice(WARPGROUP * WG, WG)
    zero_s = gl.full([WG, BLOCK_N], 0.0, gl.float32, s_layout)

    # Block 0 on its own: its scores, then the first softmax. Every row sees key 0, so no row's maximum
    # stays -inf (the other warpgroup's diagonal block may be fully masked for this one's rows).
    mbarrier.wait(q_bars.index(WARPGROUP), 0)
    mbarrier.wait(k_ready.index(0), 0)
    s = warpgroup_mma(q_tile, k_smem.index(0).permute((1, 0)), zero_s, use_acc=False)
    mbarrier.arrive(kv_free.index(0), count=1)  # loop trip 0 releases K(0)
    m_i, l_i, p_op = first_softmax(s, offs_m, qk_scale, n_blocks <= DIAG, CAUSAL, BLOCK_N, col_s, p_layout, dtype)
    alpha = gl.full([WG], 1.0, gl.float32, row_s)
    acc = gl.full([WG, HEAD_DIM], 0.0, gl.float32, o_layout)

    for j in range(1, n_blocks):
        s, acc_tok = issue_scores_and_pv(
            q_tile, k_smem, k_ready, v_smem, v_ready, j, p_op, acc, alpha, zero_s, STAGES, row_o
        )
        m_i, l_i, alpha, p_op = next_softmax(
            s, m_i, l_i, offs_m, j * BLOCK_N, qk_scale, j >= n_blocks - DIAG, CAUSAL, BLOCK_N, col_s, p_layout, dtype
        )
        row_sums.store(l_i)  # pins the softmax above the wait (see `_attention_hopper`)
        acc = warpgroup_mma_wait(0, deps=[acc_tok])
        mbarrier.arrive(kv_free.index(j % STAGES), count=1)  # K(j) and V(j-1) are read

    out = last_pv_output(p_op, acc, alpha, l_i, v_smem, v_ready, n_blocks, STAGES, row_o, dtype)
    q_tile.store(out)  # this warpgroup's Q rows are no longer read: they stage its output
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [q_row, 0], q_tile)
    tma.store_wait(0)


@gluon.jit
def _attn_fwd_hopper_ws(
    q_desc, k_desc, v_desc, o_desc, SQ, SK, qk_scale, HEAD_GROUP,
    BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
    SOFTMAX_REGS: gl.constexpr, LOADER_REGS: gl.constexpr,
):  # fmt: skip
    dtype: gl.constexpr = q_desc.dtype
    WG: gl.constexpr = q_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    bar_layout: gl.constexpr = mbarrier.MBarrierLayout()
    q_smem = gl.allocate_shared_memory(dtype, [2, WG, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    sink = gl.allocate_shared_memory(gl.float32, [2 * WG], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    q_bars = gl.allocate_shared_memory(gl.int64, [2, 1], bar_layout)
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    kv_free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    for i in gl.static_range(2):
        mbarrier.init(q_bars.index(i), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(kv_free.index(i), count=2)  # one arrival per softmax warpgroup
    fence_async_shared()
    # Worker partitions take no distributed tensors; each builds its own from these.
    gl.warp_specialize(
        [
            (_softmax_warpgroup, (o_desc, q_smem, k_smem, v_smem, sink, q_bars, k_ready, v_ready, kv_free,
                                  SQ, SK, qk_scale, HEAD_GROUP, 0, BLOCK_N, STAGES, CAUSAL)),
            (_softmax_warpgroup, (o_desc, q_smem, k_smem, v_smem, sink, q_bars, k_ready, v_ready, kv_free,
                                  SQ, SK, qk_scale, HEAD_GROUP, 1, BLOCK_N, STAGES, CAUSAL)),
            (_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bars, k_ready, v_ready, kv_free,
                       SQ, SK, HEAD_GROUP, BLOCK_N, STAGES, CAUSAL)),
        ],
        [4, 1],
        [SOFTMAX_REGS, LOADER_REGS],
    )  # fmt: skip


def launch_args(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, causal: bool, qk_scale: float,
    head_group: int | None = None,
) -> tuple[tuple, dict]:  # fmt: skip
    """Positional and keyword arguments of one launch (also used to compile it ahead of time)."""
    descs = (row_descriptor(q, WG_ROWS), row_descriptor(k, BLOCK_N), row_descriptor(v, BLOCK_N))
    group = head_group or default_head_group(q, k, causal)
    args = (*descs, row_descriptor(o, WG_ROWS), q.shape[2], k.shape[2], qk_scale, group)
    meta = dict(
        BLOCK_N=BLOCK_N, STAGES=STAGES[causal], CAUSAL=causal, SOFTMAX_REGS=SOFTMAX_REGS, LOADER_REGS=LOADER_REGS,
        num_warps=4, maxnreg=MAX_REGS,
    )  # fmt: skip
    return args, meta


def launch(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, causal: bool, qk_scale: float,
    head_group: int | None = None,
) -> None:  # fmt: skip
    """Write softmax(q k^T [+ causal mask]) v into o; qk_scale is the softmax scale times log2(e)."""
    args, meta = launch_args(q, k, v, o, causal, qk_scale, head_group)
    b, h, sq, _ = q.shape
    _attn_fwd_hopper_ws[(sq // BLOCK_M * b * h,)](*args, **meta)
