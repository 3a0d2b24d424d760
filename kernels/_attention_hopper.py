"""Attention forward for Hopper (sm_90) written in Gluon, Triton's lower-level dialect: the same algorithm as
`attention.py`'s kernel, with the MMA schedule spelled out so that the softmax overlaps the tensor cores.

Triton's pipeliner waits for each QK^T wgmma before its softmax and issues P@V after it, so within a program
the tensor cores idle during every softmax. Here each loop trip issues QK^T of block j and then P@V of block
j-1 (P kept from the previous trip), waits for QK^T only (the older of the two), and computes the softmax
of block j while P@V is still running; then it waits for P@V. Triton's pipeliner cannot express a wait that
leaves a wgmma in flight around non-MMA code.

Two details keep ptxas from undoing the schedule (checked on the compiled SASS by the tests):
- The rescale of the output accumulator happens before P@V is issued, never while a wgmma that writes it
  is in flight; otherwise ptxas serialises every wgmma (its C7514 "wgmma serialized" report).
- ptxas hoists a wgmma wait above independent arithmetic. A shared-memory store of the row sums (a result
  of the softmax) just before the second wait pins the softmax above it.

Inputs are the packed (B*H*S, D) rows of contiguous (B, H, S, D) tensors whose lengths are multiples of
BLOCK; K/V may have fewer heads (KV_H dividing H: query head bh = b * H + h reads the rows of K/V head
bh // (H // KV_H), `kv_head_row`), and causal q may be shorter than k (bottom-right aligned: query i sees keys
<= i + SK - SQ; the offset is a whole number of blocks, `causal_offset_blocks`). `attention.py` routes such
inputs here, on sm_90, outside the interpreter (Gluon has none), unless the warp-specialised kernel
(`_attention_hopper_ws`, head_dim 128, lengths multiples of 128) takes them.
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
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

BLOCK = 64  # query rows per program (one warpgroup) and keys per loop trip
SOFTMAX_WARPGROUPS = 1  # warpgroups per program that run the softmax, each on a SCORE_TILE
SCORE_TILE = (BLOCK, BLOCK)  # (query rows, keys) of one warpgroup's scores per loop trip
NUM_WARPS = 4
HEAD_DIMS = (64, 128)
SEQ_MULTIPLE = BLOCK

# K/V ring depth, measured on an H200 (bf16/fp16, 16k tokens): 3 stages won at head_dim 128 (1.06-1.10x
# the Triton kernel, 2 were 1.03-1.06x), 2 at head_dim 64 (1.04x; 3 were 0.97x). Shared memory per
# program: 112 KiB at head_dim 128 (two programs per SM), 40 KiB at 64.
STAGES = {64: 2, 128: 3}

# The order of the tiles (`tile_coords`): how many heads the grid walks together. Measured on an H200 in the
# suite (bf16/fp16, 16k tokens, against flash-attn 4 timed in the same rounds):
# - Non-causal: head after head. All programs of a head read its whole K/V, and those in flight cover one to
#   three heads, so K/V stay in L2; 16 heads at a time cost 3-5% (0.946-0.948x flash-attn 4 -> 0.90-0.93x).
# - Causal from S 2048: programs differ in length, and head after head the run ends on the heavy blocks of the
#   last heads. Walking a group of heads, heaviest blocks first across the group, ends it on light blocks:
#   0.921-0.931x -> 0.942-0.950x at S 2048-8192. The group's K/V must stay in L2, hence at most
#   GROUP_KV_BYTES: all 16 heads at S 16384 (128 MiB) went 0.965x -> 0.937x.
# - Causal below S 2048: head after head; 16 heads at a time was 2-6% slower at S 512-1024.
CAUSAL_GROUP_MIN_SEQ = 2048
MAX_HEAD_GROUP = 16
GROUP_KV_BYTES = 32 << 20  # of the H200's 60 MiB L2


def head_group(seq_q: int, seq_k: int, head_dim: int, itemsize: int, causal: bool) -> int:
    """HEAD_GROUP of `tile_coords` for these inputs (see above)."""
    if not causal or seq_q < CAUSAL_GROUP_MIN_SEQ:
        return 1
    kv_bytes_per_head = 2 * seq_k * head_dim * itemsize
    return max(1, min(MAX_HEAD_GROUP, GROUP_KV_BYTES // kv_bytes_per_head))


_GL_DTYPES = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}


@gluon.jit
def _load_kv(desc, row, bar, dest, ok, NBYTES: gl.constexpr):
    mbarrier.expect(bar, NBYTES, pred=ok)
    tma.async_copy_global_to_shared(desc, [row, 0], bar, dest, pred=ok)


@gluon.jit
def tile_coords(tile, n_m, n_bh, HEAD_GROUP, CAUSAL: gl.constexpr):
    """The (query block, batch*head) of tile number `tile` of n_m query blocks x n_bh heads.

    Tiles are numbered in the order programs should take them. The order walks the heads HEAD_GROUP at a time
    (the last group may be narrower) and, within a group, query block by query block across its heads;
    causal orders take the last query blocks, which see the most keys, first. HEAD_GROUP 1 is head after head.
    """
    group = tile // (HEAD_GROUP * n_m)
    first_bh = group * HEAD_GROUP
    width = gl.minimum(HEAD_GROUP, n_bh - first_bh)
    r = tile - first_bh * n_m
    block = r // width
    bh = first_bh + r - block * width
    if CAUSAL:
        block = n_m - 1 - block
    return block, bh


@gluon.jit
def program_tile(SQ, BLOCK_M: gl.constexpr, HEAD_GROUP, CAUSAL: gl.constexpr):
    """This program's (query block, batch*head) in a 1-D grid of (SQ // BLOCK_M) x (B*H) programs, one tile
    each, in `tile_coords`' order (programs start in grid order)."""
    n_m = SQ // BLOCK_M
    return tile_coords(gl.program_id(0), n_m, gl.num_programs(0) // n_m, HEAD_GROUP, CAUSAL)


@gluon.jit
def kv_head_row(bh, KV_GROUP, SK):
    """The first K/V row of query head bh (= b * H + h) in the (B * KV_H * SK, D) rows: that of K/V head
    b * KV_H + h // KV_GROUP, which is bh // KV_GROUP as H = KV_GROUP * KV_H."""
    return (bh // KV_GROUP) * SK


@gluon.jit
def causal_offset_blocks(SQ, SK, BLOCK_N: gl.constexpr):
    """Key blocks that causal attention with SQ < SK adds in front of every query block: bottom-right
    aligned, query row i sees keys <= i + SK - SQ (both lengths are multiples of BLOCK_N)."""
    return (SK - SQ) // BLOCK_N


@gluon.jit
def last_keys(first_row, SQ, SK, ROWS: gl.constexpr, layout: gl.constexpr):
    """The last key that each of the rows first_row.. first_row + ROWS - 1 sees under the causal mask
    (bottom-right aligned: i + SK - SQ)."""
    return first_row + (SK - SQ) + gl.arange(0, ROWS, layout)


@gluon.jit
def _masked_diagonal(s, offs_m, col0, BLOCK_N: gl.constexpr, col_layout: gl.constexpr):
    offs_n = col0 + gl.arange(0, BLOCK_N, col_layout)
    return gl.where(offs_m[:, None] >= offs_n[None, :], s, float("-inf"))


# The softmax of one warpgroup's score tile s (rows whose last visible keys are offs_m, BLOCK_N keys from
# col0), shared by both Hopper kernels. `diagonal`: the block touches the causal diagonal and takes the mask.
# P comes back as `dtype` in p_layout, the register layout that feeds P@V's wgmma.


@gluon.jit
def first_softmax(
    s, offs_m, qk_scale, diagonal,
    CAUSAL: gl.constexpr, BLOCK_N: gl.constexpr, col_layout: gl.constexpr, p_layout: gl.constexpr,
    dtype: gl.constexpr,
):  # fmt: skip
    """Row maxima, row sums and P of the first key block."""
    if CAUSAL:
        if diagonal:
            s = _masked_diagonal(s, offs_m, 0, BLOCK_N, col_layout)
    m_i = gl.max(s, 1) * qk_scale
    p = gl.exp2(s * qk_scale - m_i[:, None])
    return m_i, gl.sum(p, 1), gl.convert_layout(p.to(dtype), p_layout)


@gluon.jit
def next_softmax(
    s, m_i, l_i, offs_m, col0, qk_scale, diagonal,
    CAUSAL: gl.constexpr, BLOCK_N: gl.constexpr, col_layout: gl.constexpr, p_layout: gl.constexpr,
    dtype: gl.constexpr,
):  # fmt: skip
    """The online-softmax step of a later key block: new row maxima and sums, the factor alpha that rescales
    the output accumulated so far, and P."""
    if CAUSAL:
        if diagonal:
            s = _masked_diagonal(s, offs_m, col0, BLOCK_N, col_layout)
    m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
    p = gl.exp2(s * qk_scale - m_new[:, None])
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, 1)
    return m_new, l_i, alpha, gl.convert_layout(p.to(dtype), p_layout)


# The MMA schedule of one loop trip and of the last P@V, shared by both Hopper kernels (their loops differ
# only in how K/V slots are refilled). Block j lives in slot j % STAGES; its load is that slot's
# (j // STAGES)-th, which gives the phase to wait for. The helpers take the whole rings and pick the slots
# themselves: picking them in the caller, before the first wait, changed ptxas's schedule.


@gluon.jit
def issue_scores_and_pv(
    q_tile, k_smem, k_bars, v_smem, v_bars, j, p_op, acc, alpha, zero_s,
    STAGES: gl.constexpr, row_o: gl.constexpr,
):  # fmt: skip
    """Issue QK^T of block j, then P@V of block j-1 (the accumulator rescaled first, never while a wgmma
    that writes it is in flight), and wait for QK^T only: P@V keeps running during the caller's softmax.
    Returns the scores and P@V's token for the caller's second wait."""
    slot = j % STAGES
    prev = (j - 1) % STAGES
    mbarrier.wait(k_bars.index(slot), (j // STAGES) & 1)
    s_tok = warpgroup_mma(q_tile, k_smem.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    acc = acc * gl.convert_layout(alpha, row_o)[:, None]
    mbarrier.wait(v_bars.index(prev), ((j - 1) // STAGES) & 1)
    acc_tok = warpgroup_mma(p_op, v_smem.index(prev), acc, is_async=True)
    s = warpgroup_mma_wait(1, deps=[s_tok])
    return s, acc_tok


@gluon.jit
def last_pv_output(
    p_op, acc, alpha, l_i, v_smem, v_bars, n_blocks, STAGES: gl.constexpr, row_o: gl.constexpr,
    dtype: gl.constexpr,
):  # fmt: skip
    """P@V of the last block, then the output rows: the accumulator over the row sums, as `dtype`."""
    last = (n_blocks - 1) % STAGES
    acc = acc * gl.convert_layout(alpha, row_o)[:, None]
    mbarrier.wait(v_bars.index(last), ((n_blocks - 1) // STAGES) & 1)
    acc = warpgroup_mma(p_op, v_smem.index(last), acc)
    return (acc / gl.convert_layout(l_i, row_o)[:, None]).to(dtype)


@gluon.jit
def _attn_fwd_hopper(
    q_desc, k_desc, v_desc, o_desc, SQ, SK, qk_scale, HEAD_GROUP, KV_GROUP,
    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    CAUSAL: gl.constexpr,
):  # fmt: skip
    dtype: gl.constexpr = q_desc.dtype
    warps: gl.constexpr = BLOCK_M // 16
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[warps, 1], instr_shape=[16, BLOCK_N, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[warps, 1], instr_shape=[16, HEAD_DIM, 16]
    )
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    col_s: gl.constexpr = gl.SliceLayout(0, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    DIAG: gl.constexpr = BLOCK_M // BLOCK_N  # key blocks that touch the diagonal of one query block
    KV_BYTES: gl.constexpr = BLOCK_N * HEAD_DIM * 2

    start_m, bh = program_tile(SQ, BLOCK_M, HEAD_GROUP, CAUSAL)
    if CAUSAL:
        n_blocks = (start_m + 1) * DIAG + causal_offset_blocks(SQ, SK, BLOCK_N)
    else:
        n_blocks = SK // BLOCK_N
    q_row = bh * SQ + start_m * BLOCK_M
    kv_row0 = kv_head_row(bh, KV_GROUP, SK)
    offs_m = last_keys(start_m * BLOCK_M, SQ, SK, BLOCK_M, row_s)

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    sink = gl.allocate_shared_memory(gl.float32, [BLOCK_M], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_bars.index(i), count=1)
        mbarrier.init(v_bars.index(i), count=1)
    fence_async_shared()

    # Q, and the first STAGES blocks of K and V (block b in slot b % STAGES).
    mbarrier.expect(q_bar, BLOCK_M * HEAD_DIM * 2)
    tma.async_copy_global_to_shared(q_desc, [q_row, 0], q_bar, q_smem)
    for i in gl.static_range(STAGES):
        _load_kv(k_desc, kv_row0 + i * BLOCK_N, k_bars.index(i), k_smem.index(i), i < n_blocks, KV_BYTES)
        _load_kv(v_desc, kv_row0 + i * BLOCK_N, v_bars.index(i), v_smem.index(i), i < n_blocks, KV_BYTES)

    # Block 0 on its own: its scores, then the first softmax.
    zero_s = gl.full([BLOCK_M, BLOCK_N], 0.0, gl.float32, s_layout)
    mbarrier.wait(q_bar, 0)
    mbarrier.wait(k_bars.index(0), 0)
    s = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)), zero_s, use_acc=False)
    _load_kv(k_desc, kv_row0 + STAGES * BLOCK_N, k_bars.index(0), k_smem.index(0), STAGES < n_blocks, KV_BYTES)
    m_i, l_i, p_op = first_softmax(s, offs_m, qk_scale, n_blocks <= DIAG, CAUSAL, BLOCK_N, col_s, p_layout, dtype)
    alpha = gl.full([BLOCK_M], 1.0, gl.float32, row_s)
    acc = gl.full([BLOCK_M, HEAD_DIM], 0.0, gl.float32, o_layout)

    # One loop, the diagonal test inside (a loop of their own for the unmasked blocks, without the mask's
    # per-trip compares and selects, measured 0.95-0.97x at head_dim 64 on an H200).
    for j in range(1, n_blocks):
        slot = j % STAGES
        prev = (j - 1) % STAGES
        s, acc_tok = issue_scores_and_pv(
            q_smem, k_smem, k_bars, v_smem, v_bars, j, p_op, acc, alpha, zero_s, STAGES, row_o
        )
        m_i, l_i, alpha, p_op = next_softmax(
            s, m_i, l_i, offs_m, j * BLOCK_N, qk_scale, j >= n_blocks - DIAG, CAUSAL, BLOCK_N, col_s, p_layout, dtype
        )
        # K block j is consumed: its slot takes block j + STAGES.
        _load_kv(k_desc, kv_row0 + (j + STAGES) * BLOCK_N, k_bars.index(slot), k_smem.index(slot),
                 j + STAGES < n_blocks, KV_BYTES)  # fmt: skip
        sink.store(l_i)  # pins the softmax above the wait (see the module docstring)
        acc = warpgroup_mma_wait(0, deps=[acc_tok])
        # V block j-1 is consumed: its slot takes block j - 1 + STAGES.
        _load_kv(v_desc, kv_row0 + (j - 1 + STAGES) * BLOCK_N, v_bars.index(prev), v_smem.index(prev),
                 j - 1 + STAGES < n_blocks, KV_BYTES)  # fmt: skip

    out = last_pv_output(p_op, acc, alpha, l_i, v_smem, v_bars, n_blocks, STAGES, row_o, dtype)
    q_smem.store(out)  # Q is no longer read: its tile stages the output for the TMA store
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [q_row, 0], q_smem)
    tma.store_wait(0)
    mbarrier.invalidate(q_bar)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(k_bars.index(i))
        mbarrier.invalidate(v_bars.index(i))


def default_head_group(q: torch.Tensor, k: torch.Tensor, causal: bool) -> int:
    """`head_group` for (B, H, S, D) inputs q and k."""
    return head_group(q.shape[2], k.shape[2], q.shape[3], q.element_size(), causal)


@functools.cache
def _tile_layout(rows: int, head_dim: int, dtype: torch.dtype) -> gl.NVMMASharedLayout:
    return gl.NVMMASharedLayout.get_default_for([rows, head_dim], _GL_DTYPES[dtype])


def row_descriptor(t: torch.Tensor, rows: int = BLOCK) -> TensorDescriptor:
    """TMA descriptor over the (B*H*S, D) rows of a contiguous (B, H, S, D) tensor, `rows` rows per tile."""
    d = t.shape[-1]
    return TensorDescriptor.from_tensor(t.view(-1, d), [rows, d], _tile_layout(rows, d, t.dtype))


def launch_args(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, causal: bool, qk_scale: float,
    head_group: int | None = None,
) -> tuple[tuple, dict]:  # fmt: skip
    """Positional and keyword arguments of one launch (also used to compile it ahead of time)."""
    d = q.shape[-1]
    group = head_group or default_head_group(q, k, causal)
    kv_group = q.shape[1] // k.shape[1]
    args = (*(row_descriptor(t) for t in (q, k, v, o)), q.shape[2], k.shape[2], qk_scale, group, kv_group)
    meta = dict(HEAD_DIM=d, BLOCK_M=BLOCK, BLOCK_N=BLOCK, STAGES=STAGES[d], CAUSAL=causal, num_warps=NUM_WARPS)
    return args, meta


def suits(seq_q: int, causal: bool) -> bool:
    """Whether "auto" should take this kernel where it applies: always (it is the fallback on Hopper)."""
    return True


LAUNCH_KIND = "gluon Hopper kernel"  # how launch records name this kernel


@functools.cache
def launch_config(head_dim: int, causal: bool) -> triton.Config:
    """What a launch runs, for the launch records: tile, warps and K/V ring depth."""
    return triton.Config({"BLOCK_M": BLOCK, "BLOCK_N": BLOCK}, num_warps=NUM_WARPS, num_stages=STAGES[head_dim])


def launch(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, causal: bool, qk_scale: float,
    head_group: int | None = None,
) -> None:  # fmt: skip
    """Write softmax(q k^T [+ causal mask]) v into o; qk_scale is the softmax scale times log2(e)."""
    args, meta = launch_args(q, k, v, o, causal, qk_scale, head_group)
    b, h, sq, _ = q.shape
    _attn_fwd_hopper[(sq // BLOCK * b * h,)](*args, **meta)
