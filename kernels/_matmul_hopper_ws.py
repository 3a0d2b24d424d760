"""Warp-specialised, persistent matmul for Hopper (sm_90) in Gluon, with the epilogue of `matmul.py`'s kernels
(bias, GELU, the pre-activation kept) overlapped with the next tile's products: CUTLASS's "ping-pong" schedule.

In `_matmul_tma_kernel` every warp of a program computes one output tile, then runs its epilogue while the
tensor cores wait: bias, GELU (two MUFU operations and about a dozen others per element) and the stores add
their time to every tile's. Here each program runs three partitions:
- a loader warp that only issues TMA copies: per tile, A and B blocks of BLOCK_K into a ring of STAGES slots;
- two MMA warpgroups, each owning whole tiles (the program's even tiles and its odd ones): the K loop by
  asynchronous wgmma, then the tile's epilogue from its own registers and its TMA store from a buffer of its
  own.
The loader fills the ring in tile order, and a warpgroup starts a tile's products only once the other has
issued all of the tile's before (a slot's barriers tell its occupants apart by the parity of their phase
alone, so no warpgroup may wait on a block two occupants ahead). So the two take turns on the tensor cores,
and while one runs its epilogue the other's products keep them busy.

The grid is persistent (one program per SM, fewer when there are fewer tiles): program p takes tiles p, p + P,
p + 2P, ... in `_grouped_tile`'s order (GROUP_M row tiles share B's column panels in L2). The register file
is split with setmaxnreg as in `_attention_hopper_ws`: 240 per thread for the MMA warpgroups (a 128x128 fp32
accumulator is 128 of them), 24 for the loader's warpgroup.

Inputs are 16-bit, each operand row-major or column-major (a transposed view: its descriptor reads the
storage and the MMA reads the shared tile transposed), with strides TMA can read (`matmul.tma_layout`);
out-of-bounds reads are zero-filled and stores clipped, so any M, N, K > 0. Gluon has no interpreter: on a CPU
this kernel is compiled, not run (the tests check its builds); `matmul.launch_matmul` takes it as the path
"ws", on sm_90.
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

from ._activations import activate
from ._common import num_sms
from .matmul import _grouped_tile

BLOCK_M = 128  # output rows per tile (one warpgroup's)
BLOCK_N = 128
BLOCK_K = 64
GROUP_M = 8
MMA_WARPGROUPS = 2
# Shared memory: 32 KiB per ring slot (A and B blocks), 32 KiB per warpgroup's output buffer: 192 KiB.
STAGES = 4
MMA_REGS = 240
LOADER_REGS = 24
MAX_REGS = 168  # the launch bound: 12 warps (3 warpgroups) within the SM's 64K registers
NUM_WARPS = 12  # as launched: the default partition's 4, the other MMA warpgroup's 4, the loader's 4
_GL_DTYPES = {
    torch.float16: gl.float16,
    torch.bfloat16: gl.bfloat16,
    torch.float32: gl.float32,
    torch.float8_e4m3fn: gl.float8e4nv,
    torch.float8_e5m2: gl.float8e5,
}


@functools.cache
def launch_config() -> triton.Config:
    """What a launch runs, for the launch records: tile, warps and ring depth."""
    kw = {"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "BLOCK_K": BLOCK_K, "GROUP_M": GROUP_M}
    return triton.Config(kw, num_warps=NUM_WARPS, num_stages=STAGES)


@gluon.jit
def _tile_origin(j, M, N, GROUP: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr):
    """The first row and column of this program's j-th tile, and whether it exists."""
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    tile = gl.program_id(0) + j * gl.num_programs(0)
    pid_m, pid_n = _grouped_tile(tile, num_pid_m, num_pid_n, GROUP)
    return pid_m * BM, pid_n * BN, tile < num_pid_m * num_pid_n


@gluon.jit
def _loader(
    a_desc, b_desc, a_smem, b_smem, ready, free, M, N, K,
    A_COL_MAJOR: gl.constexpr, B_COL_MAJOR: gl.constexpr, GROUP: gl.constexpr, BM: gl.constexpr,
    BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
):  # fmt: skip
    NBYTES: gl.constexpr = (BM + BN) * BK * a_desc.dtype.primitive_bitwidth // 8
    k_tiles = gl.cdiv(K, BK)
    off_m, off_n, more = _tile_origin(0, M, N, GROUP, BM, BN)
    j = 0
    while more:
        for kk in range(k_tiles):
            # Block kk of tile j lives in slot (j k_tiles + kk) % STAGES, as the MMA warpgroups count.
            pos = j * k_tiles + kk
            slot = pos % STAGES
            mbarrier.wait(free.index(slot), ((pos // STAGES) & 1) ^ 1)  # a fresh barrier passes phase 1
            mbarrier.expect(ready.index(slot), NBYTES)
            if A_COL_MAJOR:
                tma.async_copy_global_to_shared(a_desc, [kk * BK, off_m], ready.index(slot), a_smem.index(slot))
            else:
                tma.async_copy_global_to_shared(a_desc, [off_m, kk * BK], ready.index(slot), a_smem.index(slot))
            if B_COL_MAJOR:
                tma.async_copy_global_to_shared(b_desc, [off_n, kk * BK], ready.index(slot), b_smem.index(slot))
            else:
                tma.async_copy_global_to_shared(b_desc, [kk * BK, off_n], ready.index(slot), b_smem.index(slot))
        j += 1
        off_m, off_n, more = _tile_origin(j, M, N, GROUP, BM, BN)


@gluon.jit
def _mma_warpgroup(
    c_desc, z_desc, bias_ptr, a_smem, b_smem, out_smem, ready, free, issued, M, N, K,
    WARPGROUP: gl.constexpr, A_COL_MAJOR: gl.constexpr, B_COL_MAJOR: gl.constexpr, HAS_BIAS: gl.constexpr,
    ACTIVATION: gl.constexpr, STORE_PRE: gl.constexpr, GROUP: gl.constexpr, BM: gl.constexpr,
    BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
):  # fmt: skip
    dtype: gl.constexpr = c_desc.dtype
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
    col_layout: gl.constexpr = gl.SliceLayout(0, acc_layout)
    out = out_smem.index(WARPGROUP)
    k_tiles = gl.cdiv(K, BK)
    t = 0  # tiles this warpgroup has started: it takes the program's j-th tile, j = 2 t + WARPGROUP
    j = WARPGROUP
    off_m, off_n, more = _tile_origin(j, M, N, GROUP, BM, BN)
    while more:
        # A ring slot's barriers tell its occupants apart only by the parity of their phase, so a warpgroup may
        # wait on a slot only once the block before in it has arrived. The blocks before this tile's are the
        # other warpgroup's (tile j - 1): wait until it has taken all of them (its products issued).
        if WARPGROUP == 1:
            mbarrier.wait(issued.index(0), t & 1)
        elif t > 0:
            mbarrier.wait(issued.index(1), (t - 1) & 1)
        # The bias row is loaded before the products, so its latency hides behind them; it is held in its own
        # 16-bit type meanwhile (half the registers: in fp32 the kept pre-activation's build spilled).
        offs_n = off_n + gl.arange(0, BN, col_layout)
        bias = 0.0
        if HAS_BIAS:
            bias = gl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
        acc = gl.zeros([BM, BN], gl.float32, acc_layout)
        for kk in range(k_tiles):
            pos = j * k_tiles + kk
            slot = pos % STAGES
            mbarrier.wait(ready.index(slot), (pos // STAGES) & 1)
            a = a_smem.index(slot)
            if A_COL_MAJOR:
                a = a.permute((1, 0))
            b = b_smem.index(slot)
            if B_COL_MAJOR:
                b = b.permute((1, 0))
            acc = warpgroup_mma(a, b, acc, is_async=True)
            # One product in flight: the one before has read its slot, which goes back to the loader.
            acc = warpgroup_mma_wait(1, deps=[acc])
            if kk > 0:
                mbarrier.arrive(free.index((pos - 1) % STAGES), count=1)
        mbarrier.arrive(issued.index(WARPGROUP), count=1)  # the other warpgroup's next tile may start
        acc = warpgroup_mma_wait(0, deps=[acc])
        mbarrier.arrive(free.index((j * k_tiles + k_tiles - 1) % STAGES), count=1)

        if HAS_BIAS:
            acc = acc + bias.to(gl.float32)[None, :]
        if STORE_PRE:  # stored before the activation, so the two tiles are never held at once
            tma.store_wait(0)  # this warpgroup's last store has left its buffer
            out.store(acc.to(dtype))
            fence_async_shared()
            tma.async_copy_shared_to_global(z_desc, [off_m, off_n], out)
        y = activate(acc, ACTIVATION, dtype == gl.float32)
        tma.store_wait(0)
        out.store(y.to(dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [off_m, off_n], out)
        t += 1
        j += 2
        off_m, off_n, more = _tile_origin(j, M, N, GROUP, BM, BN)
    tma.store_wait(0)


@gluon.jit
def _matmul_hopper_ws(
    a_desc, b_desc, c_desc, z_desc, bias_ptr, M, N, K,
    A_COL_MAJOR: gl.constexpr, B_COL_MAJOR: gl.constexpr, HAS_BIAS: gl.constexpr, ACTIVATION: gl.constexpr,
    STORE_PRE: gl.constexpr, GROUP: gl.constexpr, STAGES: gl.constexpr, MMA_REGS: gl.constexpr,
    LOADER_REGS: gl.constexpr,
):  # fmt: skip
    dtype: gl.constexpr = c_desc.dtype
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[0] if A_COL_MAJOR else a_desc.block_type.shape[1]
    A_ROWS: gl.constexpr = a_desc.block_type.shape[0]
    A_COLS: gl.constexpr = a_desc.block_type.shape[1]
    B_ROWS: gl.constexpr = b_desc.block_type.shape[0]
    B_COLS: gl.constexpr = b_desc.block_type.shape[1]
    a_smem = gl.allocate_shared_memory(dtype, [STAGES, A_ROWS, A_COLS], a_desc.layout)
    b_smem = gl.allocate_shared_memory(dtype, [STAGES, B_ROWS, B_COLS], b_desc.layout)
    out_smem = gl.allocate_shared_memory(dtype, [2, BM, BN], c_desc.layout)
    bar_layout: gl.constexpr = mbarrier.MBarrierLayout()
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar_layout)
    issued = gl.allocate_shared_memory(gl.int64, [2, 1], bar_layout)
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(free.index(i), count=1)  # each slot's block is read by one warpgroup
    for i in gl.static_range(2):
        mbarrier.init(issued.index(i), count=1)  # a warpgroup has issued every product of its tile
    fence_async_shared()
    gl.warp_specialize(
        [
            (_mma_warpgroup, (c_desc, z_desc, bias_ptr, a_smem, b_smem, out_smem, ready, free, issued, M, N, K, 0,
                              A_COL_MAJOR, B_COL_MAJOR, HAS_BIAS, ACTIVATION, STORE_PRE, GROUP, BM, BN, BK, STAGES)),
            (_mma_warpgroup, (c_desc, z_desc, bias_ptr, a_smem, b_smem, out_smem, ready, free, issued, M, N, K, 1,
                              A_COL_MAJOR, B_COL_MAJOR, HAS_BIAS, ACTIVATION, STORE_PRE, GROUP, BM, BN, BK, STAGES)),
            (_loader, (a_desc, b_desc, a_smem, b_smem, ready, free, M, N, K, A_COL_MAJOR, B_COL_MAJOR, GROUP, BM,
                       BN, BK, STAGES)),
        ],
        [4, 1],
        [MMA_REGS, LOADER_REGS],
    )  # fmt: skip


def tile_descriptor(t: torch.Tensor, block: list[int]) -> TensorDescriptor:
    """A host TMA descriptor of `block` tiles of a row-major 2-D tensor, in the MMA's shared-memory layout
    (the Gluon matmuls' operands and outputs: 16-bit, FP8 or fp32)."""
    layout = gl.NVMMASharedLayout.get_default_for(block, _GL_DTYPES[t.dtype])
    return TensorDescriptor.from_tensor(t, block, layout)


def grid_size(m: int, n: int, device: torch.device, block_m: int = BLOCK_M, block_n: int = BLOCK_N) -> int:
    """Programs of one persistent launch: one per SM, fewer when there are fewer tiles."""
    return min(triton.cdiv(m, block_m) * triton.cdiv(n, block_n), num_sms(device))


def launch_args(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, z: torch.Tensor | None, bias: torch.Tensor | None,
    activation: int, a_col_major: bool, b_col_major: bool,
) -> tuple[tuple, dict]:  # fmt: skip
    """Positional and keyword arguments of one launch (also used to compile it ahead of time). A column-major
    operand is described by the row-major tensor it is the transpose of."""
    m, k = a.shape
    n = b.shape[1]
    a_desc = tile_descriptor(a.T, [BLOCK_K, BLOCK_M]) if a_col_major else tile_descriptor(a, [BLOCK_M, BLOCK_K])
    b_desc = tile_descriptor(b.T, [BLOCK_N, BLOCK_K]) if b_col_major else tile_descriptor(b, [BLOCK_K, BLOCK_N])
    c_desc = tile_descriptor(c, [BLOCK_M, BLOCK_N])
    z_desc = tile_descriptor(z, [BLOCK_M, BLOCK_N]) if z is not None else c_desc
    args = (a_desc, b_desc, c_desc, z_desc, bias, m, n, k)
    meta = dict(
        A_COL_MAJOR=a_col_major, B_COL_MAJOR=b_col_major, HAS_BIAS=bias is not None, ACTIVATION=activation,
        STORE_PRE=z is not None, GROUP=GROUP_M, STAGES=STAGES, MMA_REGS=MMA_REGS, LOADER_REGS=LOADER_REGS,
        num_warps=4, maxnreg=MAX_REGS,
    )  # fmt: skip
    return args, meta


def launch(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, z: torch.Tensor | None, bias: torch.Tensor | None,
    activation: int, a_col_major: bool, b_col_major: bool,
) -> None:  # fmt: skip
    """c = activation(a @ b + bias) (and z = a @ b + bias when given); validated by the caller."""
    args, meta = launch_args(a, b, c, z, bias, activation, a_col_major, b_col_major)
    _matmul_hopper_ws[(grid_size(c.shape[0], c.shape[1], c.device),)](*args, **meta)
