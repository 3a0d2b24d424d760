"""Warp-specialised, persistent attention forward for Hopper (sm_90) in Gluon: the FlashAttention-3 division
of labour.

A tile is 128 query rows of one head. Each program runs three partitions:
- a loader warp that only issues TMA copies: per tile Q, then a ring of 128-key K and V blocks, STAGES deep;
- two softmax warpgroups, each owning 64 of the tile's rows, that run `_attention_hopper`'s loop on them:
  issue QK^T of block j and P@V of block j-1, wait for QK^T, compute block j's softmax while P@V runs.

The grid is persistent: one program per SM, each taking tile after tile from a counter shared by the grid,
in `tile_coords`' order (heaviest causal tiles first), so SMs that finish early take more. The loader takes
the next tile's number and hands it to the warpgroups through shared memory; it starts the next tile's loads
(its Q as soon as the last QK^T has read the current one, its first K/V blocks as ring slots free up) while
the warpgroups finish the current tile. The output is staged in a buffer of its own, so its TMA store
overlaps the next tile. Launching a program per tile instead paid each tile's start (Q and the first K/V in
flight, the first QK^T and softmax with nothing to overlap) and end in full: measured side by side on an H200
(bf16, head_dim 128, 16k tokens), the persistent grid ran causal S 4096 1.06-1.08x as fast, S 16384
0.99-1.00x, non-causal S 4096-16384 1.02-1.06x.

Each loop trip j of a softmax warpgroup releases K(j) and V(j-1) with one arrival on one mbarrier, at the
trip's end. A Gluon arrival comes from one thread, so the compiler holds the warpgroup at a bar.sync before
and after it; releasing K on a barrier of its own as soon as QK^T had read it made 4 per trip, this 2.

Against `_attention_hopper` (one warpgroup, 64x64 tiles, the warps that compute also load) this moves the
loads off the softmax warps, shares each K/V block between 128 query rows (half the TMA and L2
traffic per score), and lets the warp schedulers overlap one warpgroup's softmax with the other's MMAs.
The register file is split with setmaxnreg: 240 per thread for the softmax warpgroups (scores, P and the
output accumulator of a 64x128 tile stay in registers), 24 for the loader's warpgroup.

The warpgroups' MMA issue is not forced to alternate ("ping-pong"): measured on an H200, through an mbarrier
pair (-3% to +2%) and through named barriers as flash-attn 4 does (-1.7% to +2.2%), it changed nothing
beyond noise, so the warp schedulers are left to interleave them.

Inputs are the packed (B*H*S, 128) rows of contiguous (B, H, S, 128) tensors whose lengths are multiples of
128, K/V with as many heads or fewer (grouped-query attention), causal q as long as k or shorter (bottom-right
aligned), as in `_attention_hopper`; `attention.py` routes only such inputs here, on sm_90, outside the
interpreter (Gluon has none).
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
    causal_offset_blocks,
    default_head_group,
    first_softmax,
    issue_scores_and_pv,
    kv_head_row,
    last_keys,
    last_pv_output,
    next_softmax,
    row_descriptor,
    tile_coords,
)
from ._common import num_sms

WG_ROWS = 64  # query rows per softmax warpgroup (one wgmma M)
BLOCK_M = 2 * WG_ROWS  # query rows per program
BLOCK_N = 128  # keys per K/V block
SOFTMAX_WARPGROUPS = 2
SCORE_TILE = (WG_ROWS, BLOCK_N)  # (query rows, keys) of one warpgroup's scores per loop trip
HEAD_DIMS = (128,)
SEQ_MULTIPLE = 128
# K/V ring depth. Shared memory per program: Q 32 KiB, K and V 32 KiB per stage each, the output 32 KiB: 192
# KiB with 2 stages; one program per SM. Side by side on an H200 (bf16, head_dim 128, 16k tokens, S 4096-16384),
# 3 stages with the output staged in Q's tile (whose next load then waits for the store) were 0.96-1.00x
# these 2 with an output buffer of their own.
STAGES = 2
# Registers per thread: the softmax warpgroups get 240, the loader's warpgroup 24; the launch bound covers
# the 12 warps (3 warpgroups) of a program within the SM's 64K registers (168 x 384 threads).
SOFTMAX_REGS = 240
LOADER_REGS = 24
MAX_REGS = 168
NUM_WARPS = 12  # as launched: the default partition's 4, the other softmax warpgroup's 4, the loader's 4
# "auto" leaves causal attention shorter than this to the one-warpgroup kernel, whose 64-row blocks compute
# less of the masked half of each diagonal block. Side by side on an H200 (bf16, head_dim 128, 16k tokens,
# causal), this kernel ran 1.02x the one-warpgroup one at S 512, 1.11x at 1024 and 1.18-1.19x at 2048; shorter
# lengths were not measured. (Before the grid was persistent it lost below 2048: 272 vs 304-306 TFLOP/s at
# S 512, 392 vs 397-400 at 1024.)
MIN_CAUSAL_SEQ = 512


def suits(seq_q: int, causal: bool) -> bool:
    """Whether "auto" should take this kernel over the one-warpgroup one (where both apply)."""
    return not causal or seq_q >= MIN_CAUSAL_SEQ


LAUNCH_KIND = "gluon Hopper kernel, warp-specialised, persistent"  # how launch records name this kernel


@functools.cache
def launch_config(head_dim: int, causal: bool) -> triton.Config:
    """What a launch runs, for the launch records: tile, warps and K/V ring depth."""
    return triton.Config({"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N}, num_warps=NUM_WARPS, num_stages=STAGES)


@gluon.jit
def _tile(tile, n_m, n_bh, SQ, SK, HEAD_GROUP, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    """Tile number `tile`'s query block, batch*head and how many K/V blocks it reads."""
    start_m, bh = tile_coords(tile, n_m, n_bh, HEAD_GROUP, CAUSAL)
    if CAUSAL:
        n_blocks = (start_m + 1) * (BLOCK_M // BLOCK_N) + causal_offset_blocks(SQ, SK, BLOCK_N)
    else:
        n_blocks = SK // BLOCK_N
    return start_m, bh, n_blocks


@gluon.jit
def _load_block(desc, row, ready, dest, free, phase, NBYTES: gl.constexpr):
    mbarrier.wait(free, phase ^ 1)  # the slot's last reader released it (a fresh barrier passes phase 1)
    mbarrier.expect(ready, NBYTES)
    tma.async_copy_global_to_shared(desc, [row, 0], ready, dest)


@gluon.jit
def _publish_tile(tile_ids, tile_ready, tile_free, i, tile):
    """Hand the program's i-th tile number (or one past the last tile: stop) to the softmax warpgroups."""
    slot = i % 2
    mbarrier.wait(tile_free.index(slot), ((i // 2) & 1) ^ 1)
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    tile_ids.index(slot).store(gl.full([1], tile, gl.int32, layout))
    mbarrier.arrive(tile_ready.index(slot), count=1)


@gluon.jit
def _read_tile(tile_ids, tile_ready, tile_free, i):
    """The program's i-th tile number, as the loader published it."""
    slot = i % 2
    mbarrier.wait(tile_ready.index(slot), (i // 2) & 1)
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    tile = gl.sum(tile_ids.index(slot).load(layout), 0)
    mbarrier.arrive(tile_free.index(slot), count=1)
    return tile


@gluon.jit
def _loader(
    q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_free, k_ready, v_ready, kv_free,
    tile_ids, tile_ready, tile_free, counters, SQ, SK, N_BH, HEAD_GROUP, KV_GROUP,
    BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
):  # fmt: skip
    WG: gl.constexpr = q_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    KV_BYTES: gl.constexpr = BLOCK_N * HEAD_DIM * 2
    n_m = SQ // (2 * WG)
    n_tiles = n_m * N_BH
    programs = gl.num_programs(0)
    # Tiles after the first come from a counter shared by the grid (counters[0]), taken one tile ahead so
    # that the next tile's loads start as soon as ring slots free up.
    tile = gl.program_id(0)
    next_tile = programs + gl.atomic_add(counters, 1)
    i = 0  # tiles this program has started
    g = 0  # K/V blocks this program has loaded: block g lives in slot g % STAGES
    while tile < n_tiles:
        _publish_tile(tile_ids, tile_ready, tile_free, i, tile)
        start_m, bh, n_blocks = _tile(tile, n_m, N_BH, SQ, SK, HEAD_GROUP, CAUSAL, 2 * WG, BLOCK_N)
        q_row = bh * SQ + start_m * 2 * WG
        kv_row = kv_head_row(bh, KV_GROUP, SK)
        for c in gl.static_range(2):
            _load_block(q_desc, q_row + c * WG, q_ready.index(c), q_smem.index(c), q_free.index(c), i & 1,
                        WG * HEAD_DIM * 2)  # fmt: skip
        # K(b) is read a loop trip before V(b): K(b+1) loads ahead of V(b). Loop trip b of the softmax
        # warpgroups releases K(b) and V(b-1) (the first trip of a tile releases the previous tile's last V),
        # completing kv_free[b % STAGES] for the (b // STAGES)-th time; K(b + STAGES) and V(b - 1 + STAGES)
        # wait for it.
        _load_block(k_desc, kv_row, k_ready.index(g % STAGES), k_smem.index(g % STAGES),
                    kv_free.index(g % STAGES), (g // STAGES) & 1, KV_BYTES)  # fmt: skip
        for b in range(1, n_blocks + 1):
            slot = (g + b) % STAGES
            phase = ((g + b) // STAGES) & 1
            if b < n_blocks:
                _load_block(k_desc, kv_row + b * BLOCK_N, k_ready.index(slot), k_smem.index(slot),
                            kv_free.index(slot), phase, KV_BYTES)  # fmt: skip
            prev = (g + b - 1) % STAGES
            _load_block(v_desc, kv_row + (b - 1) * BLOCK_N, v_ready.index(prev), v_smem.index(prev),
                        kv_free.index(slot), phase, KV_BYTES)  # fmt: skip
        g += n_blocks
        i += 1
        tile = next_tile
        if tile < n_tiles:
            next_tile = programs + gl.atomic_add(counters, 1)
    _publish_tile(tile_ids, tile_ready, tile_free, i, tile)  # past the last tile: the warpgroups stop
    # Every program takes exactly one tile number past the last. The last program to count itself out
    # (counters[1]) resets both counters, so the next launch starts from zero without a memset.
    if gl.atomic_add(counters + 1, 1) == programs - 1:
        gl.atomic_xchg(counters, 0)
        gl.atomic_xchg(counters + 1, 0)


@gluon.jit
def _softmax_warpgroup(
    o_desc, q_smem, k_smem, v_smem, o_smem, sink, q_ready, q_free, k_ready, v_ready, kv_free,
    tile_ids, tile_ready, tile_free, SQ, SK, N_BH, qk_scale, HEAD_GROUP,
    WARPGROUP: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
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

    n_m = SQ // (2 * WG)
    n_tiles = n_m * N_BH
    q_tile = q_smem.index(WARPGROUP)
    o_tile = o_smem.index(WARPGROUP)
    row_sums = sink.slice(WARPGROUP * WG, WG)
    zero_s = gl.full([WG, BLOCK_N], 0.0, gl.float32, s_layout)
    i = 0  # tiles this warpgroup has started
    g = 0  # K/V blocks before this tile's first, as the loader counts them
    tile = _read_tile(tile_ids, tile_ready, tile_free, i)
    while tile < n_tiles:
        start_m, bh, n_blocks = _tile(tile, n_m, N_BH, SQ, SK, HEAD_GROUP, CAUSAL, 2 * WG, BLOCK_N)
        first_row = start_m * 2 * WG + WARPGROUP * WG
        offs_m = last_keys(first_row, SQ, SK, WG, row_s)

        # Block 0 on its own: its scores, then the first softmax. Every row sees key 0, so no row's maximum
        # stays -inf (the other warpgroup's diagonal block may be fully masked for this one's rows).
        mbarrier.wait(q_ready.index(WARPGROUP), i & 1)
        mbarrier.wait(k_ready.index(g % STAGES), (g // STAGES) & 1)
        s = warpgroup_mma(q_tile, k_smem.index(g % STAGES).permute((1, 0)), zero_s, use_acc=False)
        mbarrier.arrive(kv_free.index(g % STAGES), count=1)  # K(0), and the previous tile's last V
        m_i, l_i, p_op = first_softmax(s, offs_m, qk_scale, n_blocks <= DIAG, CAUSAL, BLOCK_N, col_s, p_layout, dtype)
        alpha = gl.full([WG], 1.0, gl.float32, row_s)
        acc = gl.full([WG, HEAD_DIM], 0.0, gl.float32, o_layout)

        # One loop, the diagonal test inside: causal builds compute the mask's compares and selects on every
        # trip (621 SASS instructions per warp and trip, 457 non-causal), yet a loop of their own for the
        # blocks left of the diagonal measured slower on an H200: 0.95-0.98x at S 2048-4096, 1.00-1.03x at
        # 8192-16384.
        for j in range(1, n_blocks):
            s, acc_tok = issue_scores_and_pv(
                q_tile, k_smem, k_ready, v_smem, v_ready, g + j, p_op, acc, alpha, zero_s, STAGES, row_o
            )
            m_i, l_i, alpha, p_op = next_softmax(
                s, m_i, l_i, offs_m, j * BLOCK_N, qk_scale, j >= n_blocks - DIAG, CAUSAL, BLOCK_N, col_s, p_layout,
                dtype,
            )  # fmt: skip
            row_sums.store(l_i)  # pins the softmax above the wait (see `_attention_hopper`)
            acc = warpgroup_mma_wait(0, deps=[acc_tok])
            mbarrier.arrive(kv_free.index((g + j) % STAGES), count=1)  # K(j) and V(j-1) are read
        mbarrier.arrive(q_free.index(WARPGROUP), count=1)  # every QK^T of the tile is done: the next Q loads

        out = last_pv_output(p_op, acc, alpha, l_i, v_smem, v_ready, g + n_blocks, STAGES, row_o, dtype)
        tma.store_wait(0)  # the previous tile's output has left o_tile
        o_tile.store(out)
        fence_async_shared()
        tma.async_copy_shared_to_global(o_desc, [bh * SQ + first_row, 0], o_tile)
        g += n_blocks
        i += 1
        tile = _read_tile(tile_ids, tile_ready, tile_free, i)
    tma.store_wait(0)


@gluon.jit
def _attn_fwd_hopper_ws(
    q_desc, k_desc, v_desc, o_desc, counters, SQ, SK, N_BH, qk_scale, HEAD_GROUP, KV_GROUP,
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
    o_smem = gl.allocate_shared_memory(dtype, [2, WG, HEAD_DIM], o_desc.layout)
    sink = gl.allocate_shared_memory(gl.float32, [2 * WG], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    tile_ids = gl.allocate_shared_memory(gl.int32, [2, 1], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    q_ready = gl.allocate_shared_memory(gl.int64, [2, 1], bar_layout)
    q_free = gl.allocate_shared_memory(gl.int64, [2, 1], bar_layout)
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    kv_free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    tile_ready = gl.allocate_shared_memory(gl.int64, [2, 1], bar_layout)
    tile_free = gl.allocate_shared_memory(gl.int64, [2, 1], bar_layout)
    for i in gl.static_range(2):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(q_free.index(i), count=1)
        mbarrier.init(tile_ready.index(i), count=1)
        mbarrier.init(tile_free.index(i), count=2)  # one arrival per softmax warpgroup
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(kv_free.index(i), count=2)  # one arrival per softmax warpgroup
    fence_async_shared()
    # Worker partitions take no distributed tensors; each builds its own from these.
    gl.warp_specialize(
        [
            (_softmax_warpgroup, (o_desc, q_smem, k_smem, v_smem, o_smem, sink, q_ready, q_free, k_ready, v_ready,
                                  kv_free, tile_ids, tile_ready, tile_free, SQ, SK, N_BH, qk_scale, HEAD_GROUP, 0,
                                  BLOCK_N, STAGES, CAUSAL)),
            (_softmax_warpgroup, (o_desc, q_smem, k_smem, v_smem, o_smem, sink, q_ready, q_free, k_ready, v_ready,
                                  kv_free, tile_ids, tile_ready, tile_free, SQ, SK, N_BH, qk_scale, HEAD_GROUP, 1,
                                  BLOCK_N, STAGES, CAUSAL)),
            (_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_free, k_ready, v_ready, kv_free,
                       tile_ids, tile_ready, tile_free, counters, SQ, SK, N_BH, HEAD_GROUP, KV_GROUP, BLOCK_N, STAGES,
                       CAUSAL)),
        ],
        [4, 1],
        [SOFTMAX_REGS, LOADER_REGS],
    )  # fmt: skip


_COUNTERS: dict[tuple[torch.device, int], torch.Tensor] = {}


def tile_counters(device: torch.device) -> torch.Tensor:
    """The grid's tile counter and its count of finished programs, zero when a launch starts.

    The kernel leaves both at zero, so a launch reuses the pair of the last one on its device and stream
    (launches on different streams never share one). A launch captured in a CUDA graph gets a pair of its
    own, zeroed by the graph before the kernel at every replay: the capture does not run the zeroing, and
    a replay may come after other launches.
    """
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return torch.zeros(2, dtype=torch.int32, device=device)
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (device, stream)
    if key not in _COUNTERS:
        _COUNTERS[key] = torch.zeros(2, dtype=torch.int32, device=device)
    return _COUNTERS[key]


def grid_size(q: torch.Tensor) -> int:
    """Programs of one launch: one per SM (each takes tile after tile), fewer when there are fewer tiles."""
    b, h, sq, _ = q.shape
    tiles = sq // BLOCK_M * b * h
    return min(tiles, num_sms(q.device))


def launch_args(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, causal: bool, qk_scale: float,
    head_group: int | None = None,
) -> tuple[tuple, dict]:  # fmt: skip
    """Positional and keyword arguments of one launch (also used to compile it ahead of time)."""
    descs = (row_descriptor(q, WG_ROWS), row_descriptor(k, BLOCK_N), row_descriptor(v, BLOCK_N))
    group = head_group or default_head_group(q, k, causal)
    b, h, sq, _ = q.shape
    kv_group = h // k.shape[1]
    args = (*descs, row_descriptor(o, WG_ROWS), tile_counters(q.device), sq, k.shape[2], b * h, qk_scale, group,
            kv_group)  # fmt: skip
    meta = dict(
        BLOCK_N=BLOCK_N, STAGES=STAGES, CAUSAL=causal, SOFTMAX_REGS=SOFTMAX_REGS, LOADER_REGS=LOADER_REGS,
        num_warps=4, maxnreg=MAX_REGS,
    )  # fmt: skip
    return args, meta


def launch(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, causal: bool, qk_scale: float,
    head_group: int | None = None,
) -> None:  # fmt: skip
    """Write softmax(q k^T [+ causal mask]) v into o; qk_scale is the softmax scale times log2(e)."""
    args, meta = launch_args(q, k, v, o, causal, qk_scale, head_group)
    _attn_fwd_hopper_ws[(grid_size(q),)](*args, **meta)
