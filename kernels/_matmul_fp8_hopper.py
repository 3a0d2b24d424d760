"""FP8 matmul for Hopper (sm_90) in Gluon: precise accumulation with each K step's adds beside the next step's
products.

Precise accumulation (torch._scaled_mm's default) lets the tensor cores add one K step (BLOCK_K = 128) of
FP8 products in their narrow accumulator, then adds that partial tile into an fp32 one. In `matmul_fp8.py`'s
Triton kernel the add needs the step's wgmma finished, so every step waits for its own products
(`WARPGROUP.DEPBAR.LE gsb0, 0x0`) and the tensor cores idle through the adds, the barrier and the next
loads; written as "add the previous step's partial while this step's products run", Triton 3.6 still waits
for each product right after issuing it (its pipeliner keeps a wgmma in flight only where it accumulates into
a loop-carried tile). Here the schedule is spelled out: each K step issues its products into one of two
partial tiles, waits only for the previous step's (one group left in flight), and adds that partial into the
fp32 tile while the tensor cores work on the current one. The two partials alternate by the step's parity
(the loop takes two steps a trip), so no in-flight accumulator is ever moved or read.

A program is 8 warps (two warpgroups, 64 rows of the 128 x 128 tile each: three 64-register tiles a thread,
the fp32 one and the two partials) over a persistent grid (one program an SM, tiles in `_grouped_tile`'s
order); a ring of STAGES slots of A and B blocks is filled by TMA up to STAGES steps ahead, across tiles, and a
slot is refilled once both warpgroups are past the step that read it (a CTA barrier). Fast accumulation keeps
one tile in the tensor cores' accumulator with one step in flight, as the Triton kernel does.

Operands as `matmul_fp8` takes them (a row-major, b column-major, scales per tensor, row or column);
out-of-bounds reads are zero-filled and stores clipped, so any M, N, K > 0. Gluon has no interpreter: on a CPU
this kernel is compiled, not run (the tests check its builds and its SASS); `matmul_fp8(..., path="gluon")`
forces it on sm_90.
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

from ._matmul_hopper_ws import grid_size, tile_descriptor
from .matmul import _grouped_tile

BLOCK_M = 128  # two warpgroups of 64 rows
BLOCK_N = 128
BLOCK_K = 128  # a K step: four FP8 wgmma of K 32, precise accumulation's promotion interval
GROUP_M = 8
NUM_WARPS = 8
STEPS_PER_TRIP = 4  # K steps a trip of precise accumulation's loop (K is rounded up to whole trips)
# Shared memory: 32 KiB a ring slot (A and B blocks), the output tile 32 KiB (16-bit) or 64 KiB (fp32).
STAGES = 4


@functools.cache
def launch_config() -> triton.Config:
    """What a launch runs, for the launch records: tile, warps and ring depth."""
    kw = {"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "BLOCK_K": BLOCK_K, "GROUP_M": GROUP_M}
    return triton.Config(kw, num_warps=NUM_WARPS, num_stages=STAGES)


@gluon.jit
def _tile_origin(t, M, N, GROUP: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr):
    """This program's t-th tile in the persistent order: its first row and column."""
    tile = gl.program_id(0) + t * gl.num_programs(0)
    pid_m, pid_n = _grouped_tile(tile, gl.cdiv(M, BM), gl.cdiv(N, BN), GROUP)
    return pid_m * BM, pid_n * BN


@gluon.jit
def _load(a_desc, b_desc, a_smem, b_smem, ready, g, ok, off_m, off_n, off_k, STAGES: gl.constexpr):
    """Issue the TMA copies of global step g (this program's g-th K step) into its ring slot, if ok."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[0]
    NBYTES: gl.constexpr = (BM + BN) * BK * a_desc.dtype.primitive_bitwidth // 8
    slot = g % STAGES
    mbarrier.expect(ready.index(slot), NBYTES, pred=ok)
    tma.async_copy_global_to_shared(a_desc, [off_m, off_k], ready.index(slot), a_smem.index(slot), pred=ok)
    tma.async_copy_global_to_shared(b_desc, [off_n, off_k], ready.index(slot), b_smem.index(slot), pred=ok)


@gluon.jit
def _refill(a_desc, b_desc, a_smem, b_smem, ready, g, kk, k_steps, steps, here, after, STAGES: gl.constexpr):
    """Step g (step kk of its tile, whose origin is `here`; `after` is the next tile's) is finished in this
    warpgroup: once in both (a CTA barrier), its slot takes the step STAGES on, of this tile or the next
    (STAGES <= k_steps), unless the program has no such step."""
    BK: gl.constexpr = a_desc.block_type.shape[1]
    gl.thread_barrier()
    target = kk + STAGES
    this_tile = target < k_steps
    off_m = gl.where(this_tile, here[0], after[0])
    off_n = gl.where(this_tile, here[1], after[1])
    off_k = gl.where(this_tile, target, target - k_steps) * BK
    _load(a_desc, b_desc, a_smem, b_smem, ready, g + STAGES, g + STAGES < steps, off_m, off_n, off_k, STAGES)


@gluon.jit
def _issue(a_smem, b_smem, ready, part, g, USE_ACC: gl.constexpr, STAGES: gl.constexpr):
    """Wait for step g's blocks and issue its products into `part` (added to it, or over it)."""
    slot = g % STAGES
    mbarrier.wait(ready.index(slot), (g // STAGES) & 1)
    return warpgroup_mma(a_smem.index(slot), b_smem.index(slot).permute((1, 0)), part, use_acc=USE_ACC,
                         is_async=True)  # fmt: skip


@gluon.jit
def _matmul_fp8_hopper(
    a_desc, b_desc, c_desc, scale_a_ptr, scale_b_ptr, M, N, K, stride_sa, stride_sb,
    ROW_SCALES: gl.constexpr, COL_SCALES: gl.constexpr, FAST_ACCUM: gl.constexpr, GROUP: gl.constexpr,
    STAGES: gl.constexpr, STEPS_PER_TRIP: gl.constexpr,
):  # fmt: skip
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN, 32]
    )
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BN, BK], b_desc.layout)
    out = gl.allocate_shared_memory(c_desc.dtype, [BM, BN], c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
    fence_async_shared()

    # K steps a tile, rounded up to whole trips of precise accumulation's loop (a step past K reads zeros).
    k_steps = gl.cdiv(K, STEPS_PER_TRIP * BK) * STEPS_PER_TRIP
    my_tiles = gl.cdiv(gl.cdiv(M, BM) * gl.cdiv(N, BN) - gl.program_id(0), gl.num_programs(0))
    steps = my_tiles * k_steps
    gl.static_assert(STAGES <= STEPS_PER_TRIP, "a refill reaches at most one tile ahead")
    here = _tile_origin(0, M, N, GROUP, BM, BN)
    for first in gl.static_range(STAGES):  # the ring's first blocks; a step's slot then takes the step STAGES on
        _load(a_desc, b_desc, a_smem, b_smem, ready, first, first < steps, here[0], here[1], first * BK, STAGES)
    scale = 1.0
    if not ROW_SCALES:
        scale = scale * gl.load(scale_a_ptr)
    if not COL_SCALES:
        scale = scale * gl.load(scale_b_ptr)
    zero = gl.zeros([BM, BN], gl.float32, acc_layout)
    neg_zero = gl.full([BM, BN], -0.0, gl.float32, acc_layout)  # a constant of its own: not acc's registers

    for t in range(my_tiles):
        g0 = t * k_steps  # this tile's first global step; `here` is its origin, `after` the next tile's
        after = _tile_origin(t + 1, M, N, GROUP, BM, BN)
        if FAST_ACCUM:
            acc = warpgroup_mma_wait(1, deps=[_issue(a_smem, b_smem, ready, zero, g0, False, STAGES)])
            for kk in range(1, k_steps):
                acc = _issue(a_smem, b_smem, ready, acc, g0 + kk, True, STAGES)
                acc = warpgroup_mma_wait(1, deps=[acc])  # step kk - 1 has read its slot
                _refill(a_desc, b_desc, a_smem, b_smem, ready, g0 + kk - 1, kk - 1, k_steps, steps, here, after, STAGES)
            acc = warpgroup_mma_wait(0, deps=[acc])
        else:
            # Four steps a trip, into two partials taking turns: each step's products go into one while the
            # other's, the step before's, are waited for and added to acc. Nothing is in flight across a trip's
            # end (ptxas serialises every wgmma if a product in flight is carried around the loop, its registers
            # copied), so one add a trip, the last, waits with the tensor cores idle.
            acc = zero
            q0 = neg_zero  # the partials' registers, carried between trips (their values unused: use_acc=False)
            q1 = neg_zero
            for kk in range(0, k_steps, STEPS_PER_TRIP):
                g = g0 + kk
                p0 = _issue(a_smem, b_smem, ready, q0, g, False, STAGES)
                p1 = _issue(a_smem, b_smem, ready, q1, g + 1, False, STAGES)
                # A finished partial's registers (the wait's result, not the token) take the step two on.
                d0 = warpgroup_mma_wait(1, deps=[p0])
                acc = acc + d0
                _refill(a_desc, b_desc, a_smem, b_smem, ready, g, kk, k_steps, steps, here, after, STAGES)
                p0 = _issue(a_smem, b_smem, ready, d0, g + 2, False, STAGES)
                d1 = warpgroup_mma_wait(1, deps=[p1])
                acc = acc + d1
                _refill(a_desc, b_desc, a_smem, b_smem, ready, g + 1, kk + 1, k_steps, steps, here, after, STAGES)
                p1 = _issue(a_smem, b_smem, ready, d1, g + 3, False, STAGES)
                q0 = warpgroup_mma_wait(1, deps=[p0])
                acc = acc + q0
                _refill(a_desc, b_desc, a_smem, b_smem, ready, g + 2, kk + 2, k_steps, steps, here, after, STAGES)
                q1 = warpgroup_mma_wait(0, deps=[p1])
                acc = acc + q1
                if kk + STEPS_PER_TRIP < k_steps:  # the tile's last step's slot is refilled below
                    _refill(a_desc, b_desc, a_smem, b_smem, ready, g + 3, kk + 3, k_steps, steps, here, after, STAGES)
        _refill(
            a_desc, b_desc, a_smem, b_smem, ready, g0 + k_steps - 1, k_steps - 1, k_steps, steps, here, after, STAGES
        )

        off_m, off_n = here
        if ROW_SCALES:
            offs_m = off_m + gl.arange(0, BM, gl.SliceLayout(1, acc_layout))
            acc = acc * gl.load(scale_a_ptr + offs_m * stride_sa, mask=offs_m < M, other=0.0)[:, None]
        if COL_SCALES:
            offs_n = off_n + gl.arange(0, BN, gl.SliceLayout(0, acc_layout))
            acc = acc * gl.load(scale_b_ptr + offs_n * stride_sb, mask=offs_n < N, other=0.0)[None, :]
        acc = acc * scale
        tma.store_wait(0)  # the last tile's store has left the buffer
        out.store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [off_m, off_n], out)
        here = after
    tma.store_wait(0)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))


def launch_args(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, fast_accum: bool
) -> tuple[tuple, dict]:
    """Positional and keyword arguments of one launch (also used to compile it ahead of time); b (K, N)
    column-major is described by the row-major bt (N, K) it is the transpose of."""
    m, k = a.shape
    n = b.shape[1]
    row_scales, col_scales = scale_a.numel() > 1, scale_b.numel() > 1
    args = (
        tile_descriptor(a, [BLOCK_M, BLOCK_K]), tile_descriptor(b.T, [BLOCK_N, BLOCK_K]),
        tile_descriptor(c, [BLOCK_M, BLOCK_N]),
        scale_a, scale_b, m, n, k, scale_a.stride(0) if row_scales else 0, scale_b.stride(1) if col_scales else 0,
    )  # fmt: skip
    meta = dict(
        ROW_SCALES=row_scales, COL_SCALES=col_scales, FAST_ACCUM=fast_accum, GROUP=GROUP_M, STAGES=STAGES,
        STEPS_PER_TRIP=STEPS_PER_TRIP, num_warps=NUM_WARPS,
    )  # fmt: skip
    return args, meta


def launch(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, fast_accum: bool
) -> None:
    """c = (a * scale_a) @ (b * scale_b); validated by the caller (`matmul_fp8`)."""
    args, meta = launch_args(a, b, c, scale_a, scale_b, fast_accum)
    _matmul_fp8_hopper[(grid_size(c.shape[0], c.shape[1], c.device, BLOCK_M, BLOCK_N),)](*args, **meta)
