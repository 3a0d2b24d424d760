"""Split-KV attention for decode (flash-decoding), over dense K/V or a KV cache, contiguous or paged.

Decode reads a whole KV cache for a few query tokens (one, or a few with speculative decoding): one pass
over K and V with little arithmetic, so the limit is memory bandwidth, and the problem is filling the GPU.
A program per (query block, head) leaves most SMs idle at batch 1, so each sequence's keys are split into
`num_splits` ranges, each read by a program of its own:

- `_split_kv_kernel`, grid (batch * kv_heads * row_blocks, num_splits): a program takes the query rows of
  one K/V head's group (heads // kv_heads query heads x q_len tokens, stacked as the rows of one tile), reads
  its split's K/V tiles once for the whole group (grouped-query attention costs no extra K/V traffic), and
  writes each row's partial output (float32) and the log2-sum-exp of its scores. With one split it writes
  the normalised output itself and nothing else runs.
- `_combine_kernel`, one program per (query row, slice of head_dim): the splits' partial outputs weighted by
  exp2(lse - max lse). A program issues all its loads at once (every split's lse and its slice of every
  partial), so the combine costs one memory round trip, and the slices give a batch-1 step enough programs.

Over a contiguous cache the split kernel copies K/V tiles through TMA descriptors over the cache's rows
(batch x kv_heads x seq, head_dim) where it splits small query tiles (`prefers_tma`; one copy instruction a
64-key tile, where pointer loads issue sixteen 16-byte copies a thread for a 128-key one), else through
pointers (`split_kv_forward`'s `tma` forces either; forced, a paged cache whose pages hold whole tiles is read
through descriptors over its (num_blocks x kv_heads x page, head_dim) rows too).

The split rule (`choose_num_splits`): no split where the grid fills the SMs already, else enough programs for
WAVES waves over the SMs, but every split at least MIN_KEYS_PER_SPLIT keys (each split costs a partial write
and its share of the combine) and KEYS_PER_PARTIAL_ROW keys per query row of its group (the float32 partials,
written and read back, then cost at most a quarter of the K/V bytes the splits read), and at most MAX_SPLITS
splits. It reads only shapes (the cache's capacity, not `cache_seqlens`): no device sync, and the same launch
for every step a CUDA graph replays. Each sequence's own length is then split evenly in the kernel (whole
BLOCK_N blocks per split, so shorter sequences leave the last splits empty).

`kernels.attention` routes q_len <= MAX_Q_LEN here (`suits`): there the prefill kernels' query tiles (32 to
128 rows) are mostly padding, each query head reads its K/V again, and their grid (query blocks x heads) is
one program per head. The tile (128 keys, 4 warps, 2 stages) and the split constants (4 waves, 128 keys a
split at least) are the best of a sweep on an H100 at q_len 1 (docs/performance.md, "A fifth H100
machine"); the threshold is reasoned, not measured.

Layouts are heads-first, as the rest of `kernels/`: q (batch, heads, q_len, head_dim), caches (batch,
kv_heads, max_seq, head_dim) or paged (num_blocks, kv_heads, block_size, head_dim). Pointer loads take any
strides, so flash-attn's sequence-first tensors need only a `.transpose(1, 2)` view (see
`attention_with_kvcache`); such a cache is read through pointers, as TMA descriptors need contiguous rows.
"""

from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
from triton.tools.tensor_descriptor import TensorDescriptor

from ._common import (
    ATTENTION_HEAD_DIMS,
    HALF_DTYPES,
    INTERPRET,
    Export,
    check_same_device,
    check_tensor,
    has_tma,
    next_pow2,
    note_launch,
    num_sms,
    on_device,
    tma_compatible,
)

_LOG2E = 1.4426950408889634

MAX_Q_LEN = 16  # `attention` takes the split-KV kernel up to this many query tokens
WAVES = 4  # programs for this many waves over the SMs
MIN_KEYS_PER_SPLIT = 128
# A split's partials (rows x head_dim float32, written, then read by the combine) against its K/V (keys x
# head_dim x 2 tensors x 2 bytes): 8 keys a row keep them at most a quarter of the K/V traffic (and far below
# the size of K, which a launch must not come near allocating).
KEYS_PER_PARTIAL_ROW = 8
MAX_SPLITS = 128
MAX_BLOCK_M = 64  # query rows per program; a larger group (heads // kv_heads x q_len) takes several programs
# head_dim columns one combine program takes, from every split (at MAX_SPLITS, 32 fp32 registers a thread at
# 4 warps): four programs a query row at head_dim 128. The combine's loads were a loop of dependent steps
# (lse, then chunks of partials) in one program a row: at batch 1 that chain, not the bytes, was its time
# (3.3-5.4 us on an H100 against cuDNN's 2.0-3.1 us reduction).
COMBINE_SLICE = 32


def combine_slice(head_dim: int) -> int:
    return min(head_dim, COMBINE_SLICE)


def suits(q_len: int) -> bool:
    """Whether `kernels.attention` should take the split-KV kernel for this query length."""
    return q_len <= MAX_Q_LEN


def _block_m(rows: int) -> int:
    """Query rows a program takes of a group of `rows`: at least 16 (the MMA's least M), at most MAX_BLOCK_M."""
    return min(MAX_BLOCK_M, max(16, next_pow2(rows)))


def _small_query_tile(head_dim: int, rows: int) -> bool:
    """Whether a program's query tile is at most 32 x 128 (head_dim up to 128): the tiles TMA reads suit."""
    return head_dim <= 128 and _block_m(rows) * head_dim <= 32 * 128


@functools.cache  # called in every (timed) decode step: built once a shape
def decode_config(head_dim: int, rows: int, page: int = 0, tma: bool = False) -> triton.Config:
    """Tile of one program: BLOCK_M query rows of a group of `rows` (at least 16, the MMA's least M), BLOCK_N
    keys per step: 128 for small query tiles (BLOCK_M x head_dim up to 32 x 128; a 64 x 128 tile with 128
    keys held 255 registers a thread) over a contiguous cache or pages of a multiple of 128 keys (`page`, 0
    for contiguous; a tile within one page reads the block table once), else 64, and 32 at head_dim 256,
    whose K and V tiles are twice as large; 64 at most under the interpreter, so that the tests' small caches
    still take several steps a split. 8 warps for a 64 x 256 tile, whose accumulator and Q spill from 4
    warps' registers (ptxas, sm_90). Three stages for 64-key tiles: at q_len 16 (8B, batch 1, KV 8k, an H100)
    they ran 15.9 us against two stages' 18.9. Read through TMA (`tma`), small query tiles take 64 keys and two
    stages: at batch 1, KV 8k (8B, an H100) 10.2 us against 128 keys' 11.6 and the pointer loads' 15.1."""
    block_m = _block_m(rows)
    if tma and _small_query_tile(head_dim, rows):
        return triton.Config({"BLOCK_M": block_m, "BLOCK_N": 64}, num_warps=4, num_stages=2)
    if head_dim > 128:
        block_n = 32
    elif INTERPRET or block_m * head_dim > 32 * 128 or page % 128:
        block_n = 64
    else:
        block_n = 128
    warps = 8 if block_m * head_dim > 64 * 128 else 4
    stages = 3 if block_n == 64 else 2
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n}, num_warps=warps, num_stages=stages)


def prefers_tma(head_dim: int, rows: int, splits: int, paged: bool = False) -> bool:
    """Whether a launch that may read through TMA should: a split launch (few sequences) of small query tiles
    (BLOCK_M x head_dim up to 32 x 128) over a contiguous cache, the case measured on a GPU (q_len 1 at batch
    1, head_dim 128, on an H100: 1.48x the pointer loads at KV 8k, 1.03x at 32k; docs/performance.md).
    Unsplit launches (many sequences), larger query tiles, head_dim 256 and paged caches keep the pointer
    loads until measured."""
    return splits > 1 and _small_query_tile(head_dim, rows) and not paged


def tma_fits(k: torch.Tensor, v: torch.Tensor, block_table: torch.Tensor | None, block_n: int) -> bool:
    """Whether K/V tiles of `block_n` keys can be read through host descriptors over the cache's rows
    ((B * KV_H * S, D), or paged (num_blocks * KV_H * page, D); one copy instruction a tile): a contiguous
    tensor, 16-byte aligned, its rows countable in int32, pages (if paged) of a multiple of `block_n` keys (a
    tile within one page), on a GPU with TMA (sm_90 or later) or under the interpreter."""
    if not (k.is_contiguous() and v.is_contiguous()) or k.numel() // k.shape[-1] >= 2**31:
        return False
    if block_table is not None and k.shape[2] % block_n:
        return False
    return tma_compatible(k) and tma_compatible(v) and (INTERPRET or has_tma(k.device))


def choose_num_splits(max_kv_len: int, programs_per_split: int, sms: int, rows: int = 1) -> int:
    """Splits of each sequence's keys: none where one program per (sequence, head group) already fills the SMs
    (at batch 64 the unsplit kernel with 128-key tiles matched cuDNN on an H100), else
    cdiv(WAVES * sms, programs_per_split) (enough programs for WAVES waves), capped so that a sequence of
    max_kv_len keys gives every split at least MIN_KEYS_PER_SPLIT keys and KEYS_PER_PARTIAL_ROW keys per
    query row of a group (`rows`: heads // kv_heads x q_len), and at MAX_SPLITS; at least 1."""
    if programs_per_split >= sms:
        return 1
    want = triton.cdiv(WAVES * sms, max(1, programs_per_split))
    least_keys = max(MIN_KEYS_PER_SPLIT, KEYS_PER_PARTIAL_ROW * rows)
    return max(1, min(want, triton.cdiv(max_kv_len, least_keys), MAX_SPLITS))


# ----------------------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------------------


@triton.jit(do_not_specialize=["CAPACITY"])  # a dense decode step changes it every call
def _split_kv_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, seqlens_ptr, table_ptr,
    KV_H, KV_GROUP, SQ, CAPACITY, NUM_BLOCKS, NUM_SPLITS,
    stride_qb, stride_qh, stride_qs, stride_qd,
    stride_kb, stride_kh, stride_ks, stride_kd,
    stride_vb, stride_vh, stride_vs, stride_vd,
    stride_ob, stride_oh, stride_os, stride_od,
    stride_len, stride_tb, stride_tn,
    qk_scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PAGE_SIZE: tl.constexpr,  # 0: K/V contiguous per sequence; else paged through table_ptr
    HAS_SEQLENS: tl.constexpr,  # sequence lengths from seqlens_ptr (clamped to CAPACITY), else CAPACITY
    CAUSAL: tl.constexpr,
    SPLIT: tl.constexpr,  # write partial outputs and their lse (NUM_SPLITS > 1), else the output itself
    UPCAST: tl.constexpr,
    TMA: tl.constexpr = False,  # k_ptr, v_ptr: host descriptors over the cache's rows, (B * KV_H * S, D) or paged
    # (NUM_BLOCKS * KV_H * PAGE_SIZE, D), pages of a multiple of BLOCK_N keys
    PDL: tl.constexpr = False,  # let the combine, launched as a programmatic dependent, start before this ends
):  # fmt: skip
    tl.static_assert(not TMA or PAGE_SIZE % BLOCK_N == 0, "a TMA tile must lie within one page")
    if PDL:  # the combine's programs may take their place now; they wait (gdc_wait) for this grid's writes
        gdc_launch_dependents()
    rows = KV_GROUP * SQ
    n_row_blocks = tl.cdiv(rows, BLOCK_M)
    bkv = tl.program_id(0) // n_row_blocks
    row_block = tl.program_id(0) - bkv * n_row_blocks
    b = (bkv // KV_H).to(tl.int64)
    kv_h = (bkv % KV_H).to(tl.int64)
    split = tl.program_id(1)

    if HAS_SEQLENS:
        seq_k = tl.minimum(tl.maximum(tl.load(seqlens_ptr + b * stride_len), 0), CAPACITY)
    else:
        seq_k = CAPACITY
    # This split's keys: an equal share of the sequence in whole BLOCK_N blocks.
    split_len = tl.cdiv(tl.cdiv(seq_k, NUM_SPLITS), BLOCK_N) * BLOCK_N
    lo = split * split_len
    hi = tl.minimum(lo + split_len, seq_k)

    # Row r of the tile is query token r % SQ of head kv_h * KV_GROUP + r // SQ.
    offs_r = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = offs_r < rows
    qi = offs_r % SQ
    h = kv_h * KV_GROUP + offs_r // SQ
    offs_d = tl.arange(0, HEAD_DIM)
    q_rows = b * stride_qb + h * stride_qh + qi * stride_qs
    q = tl.load(q_ptr + q_rows[:, None] + offs_d[None, :] * stride_qd, mask=row_ok[:, None], other=0.0)
    if UPCAST:  # interpreter only: its bf16 dot is wrong
        q = q.to(tl.float32)
    # Bottom-right causal: token i of SQ sees keys <= i + seq_k - SQ.
    last_key = qi + seq_k - SQ

    k_head = kv_h * stride_kh
    v_head = kv_h * stride_vh
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    # Whole blocks of keys that every row sees (all keys below hi, or causal, those up to the first token's
    # last key seq_k - SQ) need no mask; the rest of the split, at most two blocks, takes it.
    if CAUSAL:
        seen_by_all = seq_k - SQ + 1
    else:
        seen_by_all = seq_k
    mid = lo + tl.maximum(tl.minimum(hi, seen_by_all) - lo, 0) // BLOCK_N * BLOCK_N
    for phase in tl.static_range(2):
        if phase == 0:
            begin = lo
            end = mid
        else:
            begin = mid
            end = hi
        for start in tl.range(begin, end, BLOCK_N):
            keys = start + offs_n
            key_ok = keys < hi
            # The keys' rows: sequence b's own slice of a contiguous cache, or, paged, block key // PAGE_SIZE of
            # the block table (clamped to [0, NUM_BLOCKS): no read leaves the cache) at row key % PAGE_SIZE.
            if PAGE_SIZE == 0:
                block = b
                in_block = keys
            elif PAGE_SIZE % BLOCK_N == 0:  # the tile lies in one block (splits start at whole BLOCK_N blocks)
                block = tl.load(table_ptr + b * stride_tb + (start // PAGE_SIZE) * stride_tn).to(tl.int64)
                block = tl.minimum(tl.maximum(block, 0), NUM_BLOCKS - 1)
                in_block = start % PAGE_SIZE + offs_n
            else:
                block = tl.load(table_ptr + b * stride_tb + (keys // PAGE_SIZE) * stride_tn, mask=key_ok, other=0)
                block = tl.minimum(tl.maximum(block.to(tl.int64), 0), NUM_BLOCKS - 1)
                in_block = keys % PAGE_SIZE
            in_block = in_block.to(tl.int64)
            if TMA:  # one copy a tile; rows past hi (another head's or page's, or zeros past the cache) are masked
                if PAGE_SIZE == 0:
                    row0 = (bkv * CAPACITY + start).to(tl.int32)
                else:
                    row0 = ((block * KV_H + kv_h) * PAGE_SIZE + start % PAGE_SIZE).to(tl.int32)
                k = k_ptr.load([row0, 0])
            else:
                k_ptrs = (
                    k_ptr + (block * stride_kb + k_head + in_block * stride_ks)[:, None] + offs_d[None, :] * stride_kd
                )
                if phase == 0:
                    k = tl.load(k_ptrs)
                else:
                    k = tl.load(k_ptrs, mask=key_ok[:, None], other=0.0)
            if UPCAST:  # interpreter only: its bf16 dot is wrong
                k = k.to(tl.float32)
            qk = tl.dot(q, tl.trans(k)) * qk_scale
            if phase == 0:
                m_new = tl.maximum(m_i, tl.max(qk, 1))
                m_safe = m_new
            else:
                keep = key_ok[None, :]
                if CAUSAL:
                    keep = keep & (keys[None, :] <= last_key[:, None])
                qk = tl.where(keep, qk, float("-inf"))
                m_new = tl.maximum(m_i, tl.max(qk, 1))
                # A row that has seen no key yet keeps m = -inf; subtracting 0 then keeps p and alpha 0, not NaN.
                m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.math.exp2(qk - m_safe[:, None])
            alpha = tl.math.exp2(m_i - m_safe)
            l_i = l_i * alpha + tl.sum(p, 1)
            if TMA:
                v = v_ptr.load([row0, 0])
                if phase == 1:  # p is 0 past hi, but those rows may hold anything (0 * nan is nan)
                    v = tl.where(key_ok[:, None], v, 0.0)
            else:
                v_ptrs = (
                    v_ptr + (block * stride_vb + v_head + in_block * stride_vs)[:, None] + offs_d[None, :] * stride_vd
                )
                if phase == 0:
                    v = tl.load(v_ptrs)
                else:
                    v = tl.load(v_ptrs, mask=key_ok[:, None], other=0.0)
            if UPCAST:
                v = v.to(tl.float32)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            m_i = m_new

    seen = l_i > 0.0  # rows that saw no key (an empty split, a zero-length sequence) get 0 and lse -inf
    l_safe = tl.where(seen, l_i, 1.0)
    out = acc / l_safe[:, None]
    if SPLIT:
        # Partials are (B * H * SQ, NUM_SPLITS, HEAD_DIM), row-major by query row.
        part = ((b * (KV_H * KV_GROUP) + h) * SQ + qi) * NUM_SPLITS + split
        tl.store(out_ptr + part[:, None] * HEAD_DIM + offs_d[None, :], out, mask=row_ok[:, None])
        tl.store(lse_ptr + part, tl.where(seen, m_i + tl.log2(l_safe), float("-inf")), mask=row_ok)
    else:
        o_rows = b * stride_ob + h * stride_oh + qi * stride_os
        o_ptrs = out_ptr + o_rows[:, None] + offs_d[None, :] * stride_od
        tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])


@triton.jit
def _combine_kernel(
    part_ptr, lse_ptr, o_ptr, H, SQ, NUM_SPLITS,
    stride_ob, stride_oh, stride_os, stride_od,
    HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr,
    PDL: tl.constexpr = False,  # launched as a programmatic dependent of the split kernel: wait for its writes
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)  # (b * H + h) * SQ + i
    bh = row // SQ
    qi = row % SQ
    b = bh // H
    h = bh % H
    offs_s = tl.arange(0, BLOCK_S)
    ok = offs_s < NUM_SPLITS
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    if PDL:
        gdc_wait()
    # Both loads before any arithmetic: one round trip. Splits past NUM_SPLITS weigh 0.
    lse = tl.load(lse_ptr + row * NUM_SPLITS + offs_s, mask=ok, other=float("-inf"))
    parts = tl.load(
        part_ptr + (row * NUM_SPLITS + offs_s)[:, None] * HEAD_DIM + offs_d[None, :], mask=ok[:, None], other=0.0
    )
    m = tl.max(lse, 0)
    m = tl.where(m == float("-inf"), 0.0, m)  # no split saw a key: every weight is 0, the output 0
    w = tl.math.exp2(lse - m)
    total = tl.sum(w, 0)
    out = tl.sum(w[:, None] * parts, 0) / tl.where(total > 0.0, total, 1.0)
    o_ptrs = o_ptr + b * stride_ob + h * stride_oh + qi * stride_os + offs_d * stride_od
    tl.store(o_ptrs, out.to(o_ptr.dtype.element_ty))


# ----------------------------------------------------------------------------------------------------------
# Launcher
# ----------------------------------------------------------------------------------------------------------


def split_kv_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    scale: float | None,
    *,
    seqlens: torch.Tensor | None = None,
    block_table: torch.Tensor | None = None,
    num_splits: int | None = None,
    config: triton.Config | None = None,
    tma: bool | None = None,
    pdl: bool = False,
    cache_kind: str = "",
) -> torch.Tensor:
    """Launch without validation. q (B, H, SQ, D); k/v (B, KV_H, S, D), or with block_table (num_blocks,
    KV_H, page, D); `seqlens` (B,) int32 or None (every sequence the full S, or the table's capacity).
    `num_splits` and `config` override the split rule and the tile; `tma` forces reading K/V through TMA
    descriptors (True: the cache must suit them, `tma_fits`) or through pointers (False), None reads through
    TMA where the cache suits it and `prefers_tma` says so; `pdl` launches the combine as a programmatic
    dependent launch (sm_90+; its programs start while the split kernel's last ones run, then wait for their
    writes: the gap between the two kernels hidden; not under the interpreter); `cache_kind` names the cache in
    the launch record."""
    b, h, sq, d = q.shape
    kv_h = k.shape[1]
    o = torch.empty((b, h, sq, d), dtype=q.dtype, device=q.device)
    if b * h == 0:
        return o
    paged = block_table is not None
    page = k.shape[2] if paged else 0
    capacity = block_table.shape[1] * page if paged else k.shape[2]
    group = h // kv_h
    bm = (config or decode_config(d, group * sq, page)).kwargs["BLOCK_M"]
    programs = b * kv_h * triton.cdiv(group * sq, bm)
    splits = num_splits or choose_num_splits(capacity, programs, num_sms(q.device), group * sq)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if pdl and not has_tma(q.device):  # the same sm_90 gate as TMA's (False under the interpreter)
        raise ValueError("split_kv_forward: pdl=True needs an sm_90+ GPU (not the interpreter)")
    pdl = pdl and splits > 1  # one kernel: nothing to overlap
    # The cache is looked at only for a launch that would read through TMA, with the tile it would take.
    use_tma = False
    if prefers_tma(d, group * sq, splits, paged) if tma is None else tma:
        tma_config = config or decode_config(d, group * sq, page, tma=True)
        use_tma = tma_fits(k, v, block_table, tma_config.kwargs["BLOCK_N"])
        if tma and not use_tma:
            raise ValueError(
                "split_kv_forward: tma=True needs a contiguous cache (paged: pages of a multiple of "
                f"{tma_config.kwargs['BLOCK_N']} keys, the tile), 16-byte aligned, with fewer than 2**31 rows, on "
                f"an sm_90+ GPU; got k of shape {tuple(k.shape)}, strides {k.stride()}"
            )
    config = tma_config if use_tma else config or decode_config(d, group * sq, page)
    bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]

    if splits > 1:
        part = torch.empty((b * h * sq, splits, d), dtype=torch.float32, device=q.device)
        lse = torch.empty((b * h * sq, splits), dtype=torch.float32, device=q.device)
        dest, o_strides = part, (0, 0, 0, 0)
    else:
        part = lse = None
        dest, o_strides = o, o.stride()
    if use_tma:
        k_arg, v_arg = (TensorDescriptor.from_tensor(t.view(-1, d), [bn, d]) for t in (k, v))
    else:
        k_arg, v_arg = k, v
    table = block_table if paged else q  # any tensor: unused unless paged
    lens = seqlens if seqlens is not None else q
    table_strides = block_table.stride() if paged else (0, 0)
    _split_kv_kernel[(programs, splits)](
        q, k_arg, v_arg, dest, lse if lse is not None else dest, lens, table,
        kv_h, group, sq, capacity, k.shape[0], splits,
        *q.stride(), *k.stride(), *v.stride(), *o_strides,
        lens.stride(0) if seqlens is not None else 0, *table_strides,
        scale * _LOG2E,
        HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, PAGE_SIZE=page, HAS_SEQLENS=seqlens is not None, CAUSAL=causal,
        SPLIT=splits > 1, UPCAST=INTERPRET and q.dtype == torch.bfloat16, TMA=use_tma, PDL=pdl,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )  # fmt: skip
    if splits > 1:
        block_d = combine_slice(d)
        _combine_kernel[(b * h * sq, d // block_d)](
            part, lse, o, h, sq, splits, *o.stride(), HEAD_DIM=d, BLOCK_S=next_pow2(splits), BLOCK_D=block_d,
            PDL=pdl, num_warps=4, **({"launch_pdl": True} if pdl else {}),
        )  # fmt: skip
    kind = ("causal" if causal else "full") + f", split-kv, {splits} split{'s' if splits > 1 else ''}"
    kind += ", TMA" if use_tma else ""
    kind += ", PDL" if pdl else ""
    note_launch("attention", config, kind + (f", {cache_kind}" if cache_kind else ""))
    return o


def _check_scalars(fn: str, causal: object, scale: object, num_splits: object) -> None:
    if not isinstance(causal, bool):
        raise TypeError(f"{fn}: causal must be a bool, got {type(causal).__name__}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise TypeError(f"{fn}: scale must be a float or None, got {type(scale).__name__}")
    if num_splits is not None:
        if isinstance(num_splits, bool) or not isinstance(num_splits, int):
            raise TypeError(f"{fn}: num_splits must be an int or None, got {type(num_splits).__name__}")
        if not 1 <= num_splits <= MAX_SPLITS:
            raise ValueError(f"{fn}: num_splits must be in [1, {MAX_SPLITS}], got {num_splits}")


def _check_kvcache(
    q: object,
    k_cache: object,
    v_cache: object,
    cache_seqlens: object,
    block_table: object,
    causal: object,
    scale: object,
    num_splits: object,
    validate: object,
) -> None:
    fn = "attention_with_kvcache"
    check_tensor(fn, "q", q, dtypes=HALF_DTYPES, ndim=4, ndim_hint="(batch, heads, q_len, head_dim)")
    paged = block_table is not None
    hint = "(num_blocks, kv_heads, block_size, head_dim)" if paged else "(batch, kv_heads, max_seq, head_dim)"
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        check_tensor(fn, name, t, dtypes=HALF_DTYPES, ndim=4, ndim_hint=hint)
        if t.dtype != q.dtype:
            raise TypeError(f"{fn}: {name} must have the dtype of q ({q.dtype}), got {t.dtype}")
    if cache_seqlens is not None:
        check_tensor(fn, "cache_seqlens", cache_seqlens, dtypes=(torch.int32,), ndim=1, ndim_hint="(batch,)")
    if paged:
        check_tensor(fn, "block_table", block_table, dtypes=(torch.int32,), ndim=2,
                     ndim_hint="(batch, max_blocks_per_seq)")  # fmt: skip
    check_same_device(fn, q=q, k_cache=k_cache, v_cache=v_cache, cache_seqlens=cache_seqlens, block_table=block_table)
    _check_scalars(fn, causal, scale, num_splits)
    if not isinstance(validate, bool):
        raise TypeError(f"{fn}: validate must be a bool, got {type(validate).__name__}")

    b, h, sq, d = q.shape
    if d not in ATTENTION_HEAD_DIMS:
        raise ValueError(f"{fn}: q's head_dim must be one of {ATTENTION_HEAD_DIMS}, got shape {tuple(q.shape)}")
    if sq == 0:
        raise ValueError(f"{fn}: q_len must be >= 1, got q shape {tuple(q.shape)}")
    n0, kv_h, s, kd = k_cache.shape
    if kd != d or s == 0 or kv_h == 0 or (n0 == 0 if paged else n0 != b):
        rows = "num_blocks >= 1" if paged else f"batch {b}"
        raise ValueError(
            f"{fn}: k_cache must be {hint} with {rows}, kv_heads >= 1, a length >= 1 and head_dim {d} "
            f"to match q {tuple(q.shape)}, got shape {tuple(k_cache.shape)}"
        )
    if tuple(v_cache.shape) != tuple(k_cache.shape):
        raise ValueError(
            f"{fn}: v_cache must have the shape of k_cache {tuple(k_cache.shape)}, got shape {tuple(v_cache.shape)}"
        )
    if h % kv_h:
        raise ValueError(
            f"{fn}: q's heads ({h}) must be a multiple of the cache's kv_heads ({kv_h}), got q shape "
            f"{tuple(q.shape)}, k_cache shape {tuple(k_cache.shape)}"
        )
    if cache_seqlens is not None and cache_seqlens.shape[0] != b:
        raise ValueError(f"{fn}: cache_seqlens must have shape ({b},), got shape {tuple(cache_seqlens.shape)}")
    if paged and (block_table.shape[0] != b or block_table.shape[1] == 0):
        raise ValueError(
            f"{fn}: block_table must have shape ({b}, max_blocks_per_seq >= 1), got shape {tuple(block_table.shape)}"
        )
    capacity = block_table.shape[1] * s if paged else s
    if causal and sq > capacity:
        raise ValueError(
            f"{fn}: causal=True needs q_len ({sq}) no longer than the cache's capacity ({capacity} keys), "
            f"got q shape {tuple(q.shape)}"
        )
    if validate:
        _validate_contents(fn, sq, s, n0, capacity, cache_seqlens, block_table, causal)


def _validate_contents(
    fn: str,
    sq: int,
    page: int,
    num_blocks: int,
    capacity: int,
    cache_seqlens: torch.Tensor | None,
    block_table: torch.Tensor | None,
    causal: bool,
) -> None:
    """The checks that read cache_seqlens and block_table (a device-to-host copy and a sync)."""
    if cache_seqlens is None:
        lens = [capacity] * (block_table.shape[0] if block_table is not None else 0)
    else:
        lens = cache_seqlens.tolist()
    least = sq if causal else 0
    for i, n in enumerate(lens):
        if not least <= n <= capacity:
            rule = f"in [{least}, {capacity}] (causal: at least q_len)" if causal else f"in [0, {capacity}]"
            raise ValueError(f"{fn}: cache_seqlens[{i}] must be {rule}, got {n}")
    if block_table is None:
        return
    table = block_table.cpu()
    for i, n in enumerate(lens):
        used = table[i, : triton.cdiv(n, page)]
        bad = ((used < 0) | (used >= num_blocks)).nonzero()
        if len(bad):
            j = int(bad[0, 0])
            raise ValueError(
                f"{fn}: block_table[{i}, {j}] must be a block of the cache, in [0, {num_blocks}), got {int(used[j])}"
            )


def attention_with_kvcache(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cache_seqlens: torch.Tensor | None = None,
    block_table: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
    *,
    num_splits: int | None = None,
    validate: bool = False,
) -> torch.Tensor:
    """Attention of a few new query tokens over a KV cache (decode), split-KV; fp16/bf16, heads-first.

    q: (batch, heads, q_len, head_dim). The cache, k_cache and v_cache of one shape and q's dtype, is either
    - contiguous per sequence: (batch, kv_heads, max_seq, head_dim), block_table None; or
    - paged: (num_blocks, kv_heads, block_size, head_dim) with block_table (batch, max_blocks_per_seq) int32,
      whose entry [b, j] is the physical block holding keys j * block_size .. (j + 1) * block_size - 1 of
      sequence b (any block_size, as vLLM's and flash-attn's paged caches).
    heads must be a multiple of kv_heads (grouped-query attention: query head h reads K/V head
    h // (heads // kv_heads); K/V are never repeated). cache_seqlens (batch,) int32: sequence b attends to
    keys [0, cache_seqlens[b]); None means the whole capacity (max_seq, or max_blocks_per_seq * block_size).
    causal=True is bottom-right aligned, as flash-attn's: query token i sees keys <= i + cache_seqlens[b] -
    q_len (the new tokens are the last q_len keys of the cache). A query row that sees no key (a zero
    length, or a causal row before the first key) gets zeros. scale defaults to 1/sqrt(head_dim).
    Returns (batch, heads, q_len, head_dim), contiguous.

    Mapping from flash-attn's `flash_attn_with_kvcache`, whose tensors are sequence-first: pass
    `q.transpose(1, 2)`, `k_cache.transpose(1, 2)`, `v_cache.transpose(1, 2)` (zero-copy views: this function
    reads through strides, any strides work), the same cache_seqlens and block_table, and take
    `out.transpose(1, 2)`. Not supported: appending new k/v, rotary embeddings, cache_batch_idx, windows,
    softcap, ALiBi.

    Shapes, dtypes, devices and scalars are checked before anything is allocated. The contents of
    cache_seqlens and block_table are read only with validate=True (a device-to-host copy and a sync: for
    debugging, not for CUDA graphs); without it the kernel clamps lengths to the capacity and block numbers to
    [0, num_blocks), so a bad entry gives a wrong result, never an out-of-bounds read. num_splits overrides
    the split rule (`choose_num_splits`). The launch record (family "attention") names the split count.
    """
    _check_kvcache(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, num_splits, validate)
    if block_table is not None:
        cache_kind = f"paged cache (block_size {k_cache.shape[2]})"
    else:
        cache_kind = "contiguous cache"
    with on_device(q):
        return split_kv_forward(
            q, k_cache, v_cache, causal, scale, seqlens=cache_seqlens, block_table=block_table,
            num_splits=num_splits, cache_kind=cache_kind,
        )  # fmt: skip


# What tierbench.kernels exports of this module.
EXPORTS = {
    "attention_with_kvcache": Export(HALF_DTYPES, "attention"),
}
