"""Fused scaled-dot-product attention forward (FlashAttention style), layout (batch, heads, seq, head_dim).

One program per (BLOCK_M query rows, batch*head), in a 1-D grid of cdiv(S_q, BLOCK_M) x B*H programs head
after head, so programs next to each other share one head's K/V in L2. Q/K/V/O move by TMA. Packed inputs
(contiguous (B, H, S, D), both lengths multiples of 128) go through host-side descriptors over the (B*H*S, D)
rows, passed as kernel parameters; any other layout through per-head descriptors each program builds in device
memory (shape (seq, head_dim): out-of-range rows read as zeros and are never stored, so ragged sequence
lengths need masks only on the last K/V block). Building those costs each program a global write and a fence:
on the H200 the host-side ones ran causal bf16 D128 8% faster at S 8192 and 14% at S 2048 (same config, side
by side). K/V tiles stream through shared memory in a software-pipelined loop with an online softmax in exp2,
log2(e) folded into the scale; the seq x seq scores never leave the chip.

On Hopper (sm_90), contiguous inputs run one of two Gluon kernels (Gluon: Triton's lower-level dialect)
instead, the same algorithm with the MMA schedule written out so that each softmax overlaps the tensor
cores: head_dim 128 with lengths multiples of 128 the warp-specialised `_attention_hopper_ws` (a TMA warp
and two softmax warpgroups per 128 rows, one persistent program per SM), else head_dim 64/128 with lengths
multiples of 64 `_attention_hopper` (one warpgroup per 64 rows). Everything else, and every launch under the
interpreter, runs the kernel below.

K/V may have fewer heads than Q (grouped-query attention): query head h reads K/V head h // (H // KV_H), the
same K/V rows for the whole group (never copied); the grid runs head after head, so a group's programs are
neighbours and share its K/V in L2.

causal=True is bottom-right aligned, as flash-attn's: query i of S_q sees keys <= i + S_k - S_q (S_q <= S_k;
with S_q == S_k this is SDPA's top-left is_causal). It runs in two stages: the key blocks every row of the
query block sees, with no mask at all, then the diagonal blocks with the mask; blocks right of the diagonal
are skipped. Causal programs run the heaviest query blocks first.

`attention` sends short queries (decode: S_q <= decode.MAX_Q_LEN) to the split-KV kernel of `decode.py`.

`attention` is differentiable. Where an input requires grad (and grad mode is on) it runs through
`_AttentionFunction`: the forward runs the Triton kernel below, also on Hopper and for short queries (the
Gluon and decode kernels store no log-sum-exp), with STORE_LSE on, saves q, k, v, O and the (B, H, S_q) fp32
log-sum-exp, and the backward is `attention_backward` (FlashAttention-2, grouped K/V heads summed per
group). Otherwise nothing is stored or saved and the kernels launched are the same as without a backward.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable
from triton.tools.tensor_descriptor import TensorDescriptor

from . import _attention_hopper as hopper
from . import _attention_hopper_ws as hopper_ws
from . import decode
from ._common import (
    ATTENTION_HEAD_DIMS,
    HALF_DTYPES,
    INTERPRET,
    Export,
    check_same_device,
    check_tensor,
    ensure_allocator,
    is_hopper,
    note_launch,
    on_device,
)
from .attention_backward import attention_backward

# ----------------------------------------------------------------------------------------------------------
# Configs
# ----------------------------------------------------------------------------------------------------------

_LOG2E = 1.4426950408889634
HEAD_DIMS = ATTENTION_HEAD_DIMS


# Sequence lengths that are multiples of this (every config's BLOCK_M and BLOCK_N divides it) can use the
# host-side descriptors over all heads' rows: no block then reaches into the next head's rows.
PACKED_SEQ_MULTIPLE = 128


def _set_block_shapes(nargs: dict) -> None:
    # Host-side descriptors carry the tile shape, which depends on the config being launched.
    if isinstance(nargs["q_ptr"], TensorDescriptor):
        d = nargs["HEAD_DIM"]
        nargs["q_ptr"].block_shape = nargs["o_ptr"].block_shape = [nargs["BLOCK_M"], d]
        nargs["k_ptr"].block_shape = nargs["v_ptr"].block_shape = [nargs["BLOCK_N"], d]


def _cfg(bm: int, bn: int, warps: int, stages: int, ws: bool = False) -> triton.Config:
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "WARP_SPECIALIZE": ws},
        num_warps=warps,
        num_stages=stages,
        pre_hook=_set_block_shapes,
    )


def attention_configs() -> list[triton.Config]:
    """Candidate configs (one small config under the interpreter)."""
    if INTERPRET:
        return [_cfg(32, 16, 4, 2)]
    # Measured on an H200 (bf16/fp16, B*H = 64, S = 4096/8192, D = 64/128): 64x64 with 4 warps and
    # 3 stages wins (several programs per SM overlap one's softmax with another's MMAs), 128x128 and
    # 128x64 with 8 warps come next. 64x64x2 and 128x64x2 are what fits head_dim 256. Left out: Triton's
    # warp_specialize (no faster on Hopper, NaNs at 64x64), and Q fed to the wgmma from registers (0.98-1.01x
    # at head_dim 128; 1.04-1.14x at 64, but ptxas then overwrote Q's registers inside the non-causal loop).
    return [
        _cfg(64, 64, 4, 3),
        _cfg(128, 128, 8, 3),
        _cfg(128, 64, 8, 3),
        _cfg(128, 64, 8, 4),
        _cfg(64, 64, 4, 2),
        _cfg(128, 64, 8, 2),
    ]


def prune_attention_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Drop configs whose tiles overflow shared memory/registers at this head_dim or dwarf short sequences."""
    if len(configs) <= 1:
        return configs
    head_dim = kwargs["HEAD_DIM"]
    sq = named_args["SQ"]
    kept = []
    for cfg in configs:
        bm, bn = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"]
        # Q tile + K and V tiles per stage, 2 bytes each.
        smem = (bm + 2 * bn * cfg.num_stages) * head_dim * 2
        if smem > 200 * 1024:
            continue
        if bm % bn:  # the causal diagonal stage walks whole BLOCK_N blocks inside one BLOCK_M block
            continue
        if head_dim >= 256 and bn > 64:  # the fp32 accumulator already fills the registers
            continue
        if bm > max(64, triton.next_power_of_2(sq)):
            continue
        kept.append(cfg)
    return kept or [min(configs, key=lambda c: c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"])]


# ----------------------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------------------


@triton.jit
def _attn_inner(
    acc,
    l_i,
    m_i,
    q,
    k_desc,
    v_desc,
    kv_row0,  # this head's first row in the K/V descriptors
    lo,
    hi,
    last_key,  # causal: the last key each query row sees
    SK,
    qk_scale,
    MASK: tl.constexpr,  # 0: none, 1: causal diagonal, 2: keys past SK
    BLOCK_N: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
    UPCAST: tl.constexpr,
):
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = k_desc.load([kv_row0 + start_n, 0])
        if UPCAST:  # interpreter only: its bf16 dot is wrong
            k = k.to(tl.float32)
        qk = tl.dot(q, tl.trans(k))
        if MASK == 0:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        else:
            if MASK == 1:
                keep = last_key[:, None] >= (start_n + offs_n)[None, :]
            else:
                keep = (start_n + offs_n < SK)[None, :]
            # A large finite negative, not -inf: a fully masked row must not produce inf - inf.
            qk = qk * qk_scale + tl.where(keep, 0.0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = v_desc.load([kv_row0 + start_n, 0])
        if UPCAST:
            v = v.to(tl.float32)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def _attn_fwd_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    H,
    KV_GROUP,  # query heads per K/V head
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
    stride_ob,
    stride_oh,
    stride_os,
    qk_scale,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST: tl.constexpr,
    EVEN_N: tl.constexpr,
    PACKED: tl.constexpr,  # q_ptr..o_ptr are host-side descriptors over (B*H*S, D) rows
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
    lse_ptr=None,  # (B, H, SQ) fp32, written if STORE_LSE
    STORE_LSE: tl.constexpr = False,  # each query row's log-sum-exp, for the backward
):
    tl.static_assert(not CAUSAL or BLOCK_M % BLOCK_N == 0, "causal needs BLOCK_M % BLOCK_N == 0")
    # A 1-D grid, head after head (B*H may exceed the 65535 limit of a grid's y axis).
    n_m = tl.cdiv(SQ, BLOCK_M)
    bh = tl.program_id(0) // n_m
    start_m = tl.program_id(0) - bh * n_m
    if CAUSAL:  # the last query blocks see the most keys: start them first
        start_m = n_m - 1 - start_m
    if PACKED:
        q_desc = q_ptr
        k_desc = k_ptr
        v_desc = v_ptr
        o_desc = o_ptr
        q_row0 = bh * SQ
        kv_row0 = (bh // KV_GROUP) * SK  # b * KV_H + h // KV_GROUP, as H = KV_GROUP * KV_H
    else:
        b = (bh // H).to(tl.int64)
        h = (bh % H).to(tl.int64)
        kv_h = h // KV_GROUP
        q_desc = tl.make_tensor_descriptor(
            q_ptr + b * stride_qb + h * stride_qh, [SQ, HEAD_DIM], [stride_qs, 1], [BLOCK_M, HEAD_DIM]
        )
        k_desc = tl.make_tensor_descriptor(
            k_ptr + b * stride_kb + kv_h * stride_kh, [SK, HEAD_DIM], [stride_ks, 1], [BLOCK_N, HEAD_DIM]
        )
        v_desc = tl.make_tensor_descriptor(
            v_ptr + b * stride_vb + kv_h * stride_vh, [SK, HEAD_DIM], [stride_vs, 1], [BLOCK_N, HEAD_DIM]
        )
        o_desc = tl.make_tensor_descriptor(
            o_ptr + b * stride_ob + h * stride_oh, [SQ, HEAD_DIM], [stride_os, 1], [BLOCK_M, HEAD_DIM]
        )
        q_row0 = 0
        kv_row0 = 0

    off_m = start_m * BLOCK_M
    offs_m = off_m + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    q = q_desc.load([q_row0 + off_m, 0])
    if UPCAST:
        q = q.to(tl.float32)

    if CAUSAL:
        # Bottom-right aligned: query row i sees keys <= i + SK - SQ (SQ == SK: key i, top-left).
        last_key = offs_m + (SK - SQ)
        # Whole key blocks that every row of this query block sees: no mask. With SQ == SK that is all
        # blocks left of the query block (needs BLOCK_M % BLOCK_N == 0).
        diag_lo = (off_m + SK - SQ + 1) // BLOCK_N * BLOCK_N
        acc, l_i, m_i = _attn_inner(
            acc, l_i, m_i, q, k_desc, v_desc, kv_row0, 0, diag_lo, last_key, SK, qk_scale, 0,
            BLOCK_N, WARP_SPECIALIZE, UPCAST,
        )  # fmt: skip
        # Diagonal blocks, masked; keys past SK fall right of the diagonal for every real query row.
        hi = tl.minimum(off_m + BLOCK_M + SK - SQ, SK)
        acc, l_i, m_i = _attn_inner(
            acc, l_i, m_i, q, k_desc, v_desc, kv_row0, diag_lo, hi, last_key, SK, qk_scale, 1,
            BLOCK_N, WARP_SPECIALIZE, UPCAST,
        )  # fmt: skip
    elif EVEN_N:
        # SK % BLOCK_N == 0: one unmasked loop over all keys.
        acc, l_i, m_i = _attn_inner(
            acc, l_i, m_i, q, k_desc, v_desc, kv_row0, 0, SK, offs_m, SK, qk_scale, 0,
            BLOCK_N, WARP_SPECIALIZE, UPCAST,
        )  # fmt: skip
    else:
        full = (SK // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _attn_inner(
            acc, l_i, m_i, q, k_desc, v_desc, kv_row0, 0, full, offs_m, SK, qk_scale, 0,
            BLOCK_N, WARP_SPECIALIZE, UPCAST,
        )  # fmt: skip
        # The ragged last K/V block, masked.
        acc, l_i, m_i = _attn_inner(
            acc, l_i, m_i, q, k_desc, v_desc, kv_row0, full, SK, offs_m, SK, qk_scale, 2,
            BLOCK_N, WARP_SPECIALIZE, UPCAST,
        )  # fmt: skip

    acc = acc / l_i[:, None]
    o_desc.store([q_row0 + off_m, 0], acc.to(o_desc.dtype))
    if STORE_LSE:  # ln of sum_j exp(scale * q.k_j): m_i and log2(l_i) are in log2 units, times ln(2)
        lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453
        tl.store(lse_ptr + bh.to(tl.int64) * SQ + offs_m, lse, mask=offs_m < SQ)


def _even_n(args: dict) -> bool:
    return args["SK"] % args["BLOCK_N"] == 0


_attn_fwd_tuned = triton.autotune(
    configs=attention_configs(),
    key=["SQ", "SK", "HEAD_DIM", "CAUSAL", "PACKED", "STORE_LSE"],  # STORE_LSE only when passed (a backward's)
    prune_configs_by={"early_config_prune": prune_attention_configs},
)(triton.heuristics({"EVEN_N": _even_n})(_attn_fwd_kernel))


# ----------------------------------------------------------------------------------------------------------
# Launcher
# ----------------------------------------------------------------------------------------------------------


def _check_attention(q: object, k: object, v: object, causal: object, scale: object) -> None:
    hint = "(batch, heads, seq, head_dim)"
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor("attention", name, t, dtypes=HALF_DTYPES, ndim=4, ndim_hint=hint)
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise TypeError(f"attention: {name} must have the dtype of q ({q.dtype}), got {t.dtype}")
    check_same_device("attention", q=q, k=k, v=v)
    b, h, sq, d = q.shape
    if d not in HEAD_DIMS:
        raise ValueError(f"attention: q's head_dim must be one of {HEAD_DIMS}, got shape {tuple(q.shape)}")
    if k.shape[0] != b or k.shape[3] != d:
        raise ValueError(
            f"attention: k must have shape ({b}, kv_heads, seq_k, {d}) to match q {tuple(q.shape)}, "
            f"got shape {tuple(k.shape)}"
        )
    kv_h = k.shape[1]
    if (kv_h == 0) != (h == 0) or (kv_h and h % kv_h):
        raise ValueError(
            f"attention: q's heads ({h}) must be a multiple of k's heads ({kv_h}), got q shape "
            f"{tuple(q.shape)}, k shape {tuple(k.shape)}"
        )
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"attention: v must have the shape of k {tuple(k.shape)}, got shape {tuple(v.shape)}")
    if sq == 0 or k.shape[2] == 0:
        raise ValueError(
            f"attention: sequence lengths must be >= 1, got q shape {tuple(q.shape)}, k shape {tuple(k.shape)}"
        )
    if not isinstance(causal, bool):
        raise TypeError(f"attention: causal must be a bool, got {type(causal).__name__}")
    if causal and sq > k.shape[2]:
        raise ValueError(
            f"attention: causal=True needs q no longer than k (bottom-right aligned: query i sees keys "
            f"<= i + seq_k - seq_q), got q shape {tuple(q.shape)}, k shape {tuple(k.shape)}"
        )
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise TypeError(f"attention: scale must be a float or None, got {type(scale).__name__}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        # TMA: unit last stride, 16-byte aligned other strides and base.
        esize = t.element_size()
        if t.stride(-1) != 1 or any((s * esize) % 16 for s in t.stride()[:-1]) or t.data_ptr() % 16:
            raise ValueError(
                f"attention: {name} must have a unit last stride and 16-byte aligned strides and base, "
                f"got strides {tuple(t.stride())}"
            )


def _packs(t: torch.Tensor, seq: int, multiple: int = PACKED_SEQ_MULTIPLE) -> bool:
    """Whether t (B, H, seq, D) can be read through one descriptor over its B*H*seq rows by blocks that
    divide `multiple` (no block then reaches into the next head's rows)."""
    return t.is_contiguous() and seq % multiple == 0


def _row_descriptor(t: torch.Tensor) -> TensorDescriptor:
    # The tile shape is a placeholder until the launched config sets it (_set_block_shapes).
    rows = t.view(-1, t.shape[-1])
    return TensorDescriptor(rows, list(rows.shape), list(rows.stride()), [16, t.shape[-1]])


# The Gluon kernels for Hopper by name, in the order "auto" tries them. Each module gives HEAD_DIMS and
# SEQ_MULTIPLE (what its blocks read), suits(seq_q, causal) (whether "auto" takes it where it applies),
# launch(q, k, v, o, causal, qk_scale), and for the launch records launch_config(head_dim, causal) (tile,
# warps, K/V ring depth) and LAUNCH_KIND.
HOPPER_KERNELS = {"gluon-ws": hopper_ws, "gluon": hopper}
KERNELS = ("auto", *HOPPER_KERNELS, "triton")


def hopper_layout_fits(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kernel: str = "gluon") -> bool:
    """Whether the named Gluon kernel for Hopper (a key of HOPPER_KERNELS) can read these (validated) inputs:
    a head_dim it was built for, contiguous tensors whose lengths are multiples of its block, row indices
    within int32."""
    module = HOPPER_KERNELS[kernel]
    d, sq, sk, multiple = q.shape[-1], q.shape[2], k.shape[2], module.SEQ_MULTIPLE
    return (
        d in module.HEAD_DIMS
        and _packs(q, sq, multiple)
        and _packs(k, sk, multiple)
        and _packs(v, sk, multiple)
        and max(q.numel(), k.numel()) // d < 2**31
    )


def hopper_kernel_applies(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kernel: str = "gluon") -> bool:
    """The named Gluon kernel runs on an sm_90 GPU (its wgmma and TMA schedule is Hopper's), outside the
    interpreter (which has no Gluon), on inputs whose layout fits."""
    return is_hopper(q.device) and hopper_layout_fits(q, k, v, kernel)


def _attention_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    *,
    config: triton.Config | None = None,
    packed: bool | None = None,
    kernel: str = "auto",
    lse: torch.Tensor | None = None,
) -> torch.Tensor:
    """Launch without validation. `kernel`: one of KERNELS: a Gluon kernel for Hopper by name (an error
    where it does not apply), "triton", or "auto" (the first Gluon kernel that applies, else triton). For the
    Triton kernel, `config` bypasses the autotuner and `packed=False` forces the per-head device-side
    descriptors (None: host-side ones wherever the layout allows); either one selects it under "auto".
    `lse`, a (B, H, S_q) fp32 tensor, receives each query row's log-sum-exp for the backward: only the Triton
    kernel stores it, so it too selects that kernel under "auto"."""
    b, h, sq, d = q.shape
    sk = k.shape[2]
    o = torch.empty((b, h, sq, d), dtype=q.dtype, device=q.device)
    if b * h == 0:
        return o
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if kernel not in KERNELS:
        raise ValueError(f"attention: kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    if kernel in HOPPER_KERNELS and lse is not None:
        raise ValueError(f"attention: the Gluon kernel {kernel!r} does not store the log-sum-exp")
    if kernel in HOPPER_KERNELS:
        candidates = [kernel]
    elif kernel == "auto" and config is None and packed is None and lse is None:
        candidates = [name for name, module in HOPPER_KERNELS.items() if module.suits(sq, causal)]
    else:
        candidates = []
    for name in candidates:
        if hopper_kernel_applies(q, k, v, name):
            module = HOPPER_KERNELS[name]
            module.launch(q, k, v, o, causal, scale * _LOG2E)
            kind = ("causal" if causal else "full") + ", " + module.LAUNCH_KIND
            note_launch("attention", module.launch_config(d, causal), kind)
            return o
    if kernel in HOPPER_KERNELS:
        raise ValueError(
            f"attention: the Gluon kernel {kernel!r} does not apply to these inputs (see hopper_kernel_applies)"
        )
    ensure_allocator()
    can_pack = _packs(q, sq) and _packs(k, sk) and _packs(v, sk)
    packed = can_pack if packed is None else packed and can_pack
    tensors = [_row_descriptor(t) for t in (q, k, v, o)] if packed else [q, k, v, o]
    kv_group = h // k.shape[1]
    args = (*tensors, h, kv_group, sq, sk, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3])
    consts = {
        "qk_scale": scale * _LOG2E,
        "HEAD_DIM": d,
        "CAUSAL": causal,
        "UPCAST": INTERPRET and q.dtype == torch.bfloat16,
        "PACKED": packed,
    }
    if lse is not None:
        consts.update(lse_ptr=lse, STORE_LSE=True)
    if config is None:
        _attn_fwd_tuned[lambda meta: (triton.cdiv(sq, meta["BLOCK_M"]) * b * h,)](*args, **consts)
        config = _attn_fwd_tuned.best_config
    else:
        bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
        if causal and bm % bn:
            raise ValueError(f"attention: causal configs need BLOCK_M % BLOCK_N == 0, got {bm}x{bn}")
        grid = (triton.cdiv(sq, bm) * b * h,)
        even = sk % config.kwargs["BLOCK_N"] == 0
        meta = {**consts, "EVEN_N": even, **config.all_kwargs()}
        _set_block_shapes({**dict(zip(("q_ptr", "k_ptr", "v_ptr", "o_ptr"), tensors)), **meta})
        _attn_fwd_kernel[grid](*args, **meta)
    kind = ("causal" if causal else "full") + (", packed rows" if packed else ", per-head descriptors")
    note_launch("attention", config, kind + (", lse" if lse is not None else ""))
    return o


# ----------------------------------------------------------------------------------------------------------
# Autograd
# ----------------------------------------------------------------------------------------------------------


class _AttentionFunction(torch.autograd.Function):
    """attention with the FlashAttention-2 backward (attention_backward.py). The forward runs the Triton
    kernel with its log-sum-exp store and saves q, k, v, O and the (B, H, S_q) fp32 LSE; never P."""

    @staticmethod
    def forward(ctx, q, k, v, causal: bool, scale: float, deterministic: bool) -> torch.Tensor:
        lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
        o = _attention_forward(q, k, v, causal, scale, lse=lse)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.scale, ctx.deterministic = causal, scale, deterministic
        return o

    @staticmethod
    @once_differentiable
    def backward(ctx, do: torch.Tensor):
        q, k, v, o, lse = ctx.saved_tensors
        need_dq, need_dk, need_dv = ctx.needs_input_grad[:3]
        with on_device(q):
            dq, dk, dv = attention_backward(
                do,
                q,
                k,
                v,
                o,
                lse,
                ctx.causal,
                ctx.scale,
                group=q.shape[1] // k.shape[1],
                need_dq=need_dq,
                need_dkdv=need_dk or need_dv,
                atomic_dq=not ctx.deterministic,
            )
        return dq, dk if need_dk else None, dv if need_dv else None, None, None, None


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    deterministic: bool = True,
) -> torch.Tensor:
    """softmax(q k^T * scale [+ causal mask]) v; q (B, H, Sq, D), k/v (B, KV_H, Sk, D), fp16/bf16.

    KV_H must divide H (grouped-query attention: query head h reads K/V head h // (H // KV_H)). causal=True
    is bottom-right aligned, as flash-attn's: query i sees keys <= i + Sk - Sq, which with Sq == Sk is SDPA's
    is_causal; it needs Sq <= Sk. Query lengths up to `decode.MAX_Q_LEN` run the split-KV decode kernel
    (kernels/decode.py), longer ones the kernels of this module. Differentiable: where an input requires grad
    (and grad mode is on) the forward saves what the backward needs (causal then needs Sq == Sk); otherwise
    it saves nothing. deterministic=False lets the backward add dQ with atomics in one pass (fewer products,
    dQ's last bits may vary from run to run; attention_backward.py); the default gives the same gradients
    every run.
    """
    _check_attention(q, k, v, causal, scale)
    with on_device(q):
        if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
            if causal and q.shape[2] != k.shape[2]:
                raise ValueError(
                    f"attention: the backward of causal attention takes equal q and k lengths, got q shape "
                    f"{tuple(q.shape)}, k shape {tuple(k.shape)}"
                )
            scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
            return _AttentionFunction.apply(q, k, v, causal, scale, deterministic)
        if decode.suits(q.shape[2]):
            return decode.split_kv_forward(q, k, v, causal, scale)
        return _attention_forward(q, k, v, causal, scale)


# What tierbench.kernels exports of this module.
EXPORTS = {
    "attention": Export(HALF_DTYPES, "attention"),
}
