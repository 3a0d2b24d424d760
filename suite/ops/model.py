"""The model family: a Llama-style transformer block as one op, made of the ops of the other families.

The block (pre-norm, grouped-query attention, SwiGLU MLP), over the residual stream x (rows = batch · seq,
hidden):

    h = rms_norm(x)                          attn_norm      norm family
    qkv = h @ W_qkv                          qkv            matmul family
    o = attention(q, k, v, causal)           attention      attention family (decode: decode family)
    a = o @ W_o                              o_proj         matmul family
    n, r = add_rms_norm(a, x)                add_norm       norm family (residual add fused with RMSNorm)
    gu = n @ W_gate_up                       gate_up        matmul family
    s = silu(gate) * up                      swiglu         pointwise family (op silu_mul)
    d = s @ W_down                           down           matmul family
    out = residual_add(d, r)                 residual       pointwise family

in three phases: prefill (batch x seq new tokens, causal), decode (one new token per sequence over a KV cache
of kv_len keys: the block writes the token's keys and values into the cache's last slot, then attends over
all of it) and training (prefill's shapes, forward and backward: mode fwd_bwd, gradients of x and every
weight). Rotary position embeddings are left out (an elementwise pass over q and k).

Each part is an ordinary case of its own op at exactly the block's shapes (`parts`), which the plan measures
before the block through its family: same check, timer and records. The block itself is measured per
strategy: `eager` (the formula below: each part's eager formula, attention by SDPA's default dispatch),
`compile` (torch.compile of that whole formula: the only place cross-op fusion shows) and `best-mix` (the
fastest correct provider of each part in this run, composed: suite/measure/compose.py), each checked against the
block's float64/float32 reference (_model_reference.py). suite/show/blocks.py turns the records into the model
view.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ..measure.checking import own_tolerance
from ..show.panels import ModelPanel
from . import attention, decode, matmul, norm, pointwise
from ._model_reference import block_ref, decode_block_ref, merge_heads, split_heads
from .base import Case, DType, Family, Op, Part, View, WorkModel, choice_name, positive, randn


class Phase(Enum):
    prefill = "prefill"
    decode = "decode"
    training = "training"


# The pass each phase measures.
PHASE_MODES = {"prefill": "fwd", "decode": "fwd", "training": "fwd_bwd"}


@dataclass
class PhaseShape:
    """A prefill or training step: `batch` sequences of `seq` tokens."""

    # Sequences per step.
    batch: int = 1
    # Tokens per sequence.
    seq: int = 8192


@dataclass
class DecodeShape:
    """A decode step: one new token for each of `batch` sequences, each over a KV cache of `seq` keys."""

    # Sequences per step, one new token each.
    batch: int = 64
    # Keys each sequence attends over (its new token included).
    seq: int = 8192


@dataclass
class ModelConf:
    # A model is named by a config group (model=llama3-8b: conf/model/), which also turns the section on.
    enabled: bool = False
    # The model's name (a record's `model`).
    name: str = ""
    # Width of the residual stream.
    hidden: int = 0
    # Query heads.
    heads: int = 0
    # Key/value heads (fewer than heads: grouped-query attention).
    kv_heads: int = 0
    head_dim: int = 0
    # Width of the SwiGLU MLP (gate and up each).
    intermediate: int = 0
    dtype: DType = DType.bf16
    phases: list[Phase] = field(default_factory=lambda: list(Phase))
    prefill: PhaseShape = field(default_factory=PhaseShape)
    decode: DecodeShape = field(default_factory=DecodeShape)
    training: PhaseShape = field(default_factory=PhaseShape)


SIZES = ("hidden", "heads", "kv_heads", "head_dim", "intermediate")


def known_models() -> list[str]:
    """The models of the installed config tree (conf/model/*.yaml)."""
    import tierbench.conf

    return sorted(p.stem for p in (Path(tierbench.conf.__file__).parent / "model").glob("*.yaml"))


def validate(conf: Any) -> list[str]:
    if not conf.name:
        return [
            f"model: no model named: choose one with model=<name> ({', '.join(known_models())}), or set "
            "model.name, model.hidden, model.heads, model.kv_heads, model.head_dim and model.intermediate"
        ]
    problems = positive("model", {key: conf[key] for key in SIZES})
    for phase in conf.phases:
        name = choice_name(phase)
        shape = conf[name]
        problems += positive(f"model.{name}", {"batch": shape.batch, "seq": shape.seq})
    if problems:
        return problems
    if conf.heads % conf.kv_heads:
        problems.append(f"model: heads={conf.heads} is not a multiple of kv_heads={conf.kv_heads}")
    if conf.head_dim % 8:
        problems.append(f"model: head_dim={conf.head_dim} is not a multiple of 8 (tensor-core kernels need it)")
    return problems


def make_case(
    model: str,
    phase: str,
    batch: int,
    seq: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    intermediate: int,
    dtype: str,
    mode: str | None = None,
) -> Case:
    """One block case; ValueError for sizes that cannot make a block."""
    if phase not in PHASE_MODES:
        raise ValueError(f"model: phase must be one of {', '.join(PHASE_MODES)}, got {phase!r}")
    expected = PHASE_MODES[phase]
    if mode is not None and mode != expected:
        raise ValueError(f"model: the {phase} phase measures mode {expected}, got mode={mode!r}")
    sizes = {"batch": batch, "seq": seq, "hidden": hidden, "heads": heads, "kv_heads": kv_heads}
    sizes |= {"head_dim": head_dim, "intermediate": intermediate}
    for key, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"model: {key} must be a whole number >= 1, got {value!r}")
    if heads % kv_heads:
        raise ValueError(f"model: heads={heads} must be a multiple of kv_heads={kv_heads}")
    params: dict[str, Any] = {"model": model, "phase": phase, **sizes, "dtype": dtype, "mode": expected}
    if phase == "decode":
        label, x = f"{model} decode B{batch} KV{seq}", float(batch)
        op = "llama_block_decode"
    else:
        label, x = f"{model} {phase} B{batch} T{seq}", float(batch * seq)
        op = "llama_block"
    return Case(op, "model", params, label, x=x)


def cases(conf: Any) -> list[Case]:
    if not conf.name:  # no model named: validate says so where the section is on
        return []
    sizes = {key: int(conf[key]) for key in SIZES}
    out = []
    for phase in conf.phases:
        name = choice_name(phase)
        shape = conf[name]
        out.append(make_case(str(conf.name), name, shape.batch, shape.seq, **sizes, dtype=choice_name(conf.dtype)))
    return out


# -- the parts -----------------------------------------------------------------------------------------


def _qkv_width(p: Mapping[str, Any]) -> int:
    return (p["heads"] + 2 * p["kv_heads"]) * p["head_dim"]


def parts(case: Case) -> tuple[Part, ...]:
    """The block's chain as cases of the other families' ops at the block's shapes and pass."""
    p = case.params
    dtype, mode = p["dtype"], p["mode"]
    decoding = p["phase"] == "decode"
    rows = p["batch"] if decoding else p["batch"] * p["seq"]
    hidden, inner, width = p["hidden"], p["intermediate"], p["heads"] * p["head_dim"]
    where = f"{p['model']} {p['phase']}"

    def gemm(name: str, k: int, n: int) -> Part:
        return Part(name, matmul.make_case(rows, n, k, dtype, mode, f"{where} {name} {rows}x{k}x{n}"))

    def labelled(made: Case, name: str) -> Case:
        return Case(made.op, made.family, made.params, f"{where} {name} {made.label}", made.x)

    if decoding:
        attend = decode.make_case(
            p["batch"], p["heads"], p["kv_heads"], 1, p["seq"], p["head_dim"], dtype, mode, causal=True
        )
    else:
        attend = attention.make_case(
            p["batch"], p["heads"], p["seq"], p["head_dim"], True, dtype, mode, kv_heads=p["kv_heads"]
        )
    return (
        Part("attn_norm", labelled(norm.make_case("rms_norm", rows, hidden, dtype, mode), "attn_norm")),
        gemm("qkv", hidden, _qkv_width(p)),
        Part("attention", labelled(attend, "attention"), in_whole="baseline"),
        gemm("o_proj", width, hidden),
        Part("add_norm", labelled(norm.make_case("add_rms_norm", rows, hidden, dtype, mode), "add_norm")),
        gemm("gate_up", hidden, 2 * inner),
        Part("swiglu", labelled(pointwise.make_case("silu_mul", rows, inner, dtype, mode), "swiglu")),
        gemm("down", inner, hidden),
        Part("residual", labelled(pointwise.make_case("residual_add", rows, hidden, dtype, mode), "residual")),
    )


# -- inputs ---------------------------------------------------------------------------------------------


WEIGHTS = ("attn_norm", "w_qkv", "w_o", "mlp_norm", "w_gate_up", "w_down")


def _weights(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Norm weights near one; projections scaled by 1/sqrt(fan-in), so every activation stays O(1)."""
    p = case.params
    hidden, inner, width = p["hidden"], p["intermediate"], p["heads"] * p["head_dim"]

    def proj(k: int, n: int) -> torch.Tensor:
        return randn((k, n), case.dtype, device, gen, scale=k**-0.5)

    return {
        "attn_norm": randn((hidden,), case.dtype, device, gen, scale=0.2, shift=1.0),
        "w_qkv": proj(hidden, _qkv_width(p)),
        "w_o": proj(width, hidden),
        "mlp_norm": randn((hidden,), case.dtype, device, gen, scale=0.2, shift=1.0),
        "w_gate_up": proj(hidden, 2 * inner),
        "w_down": proj(inner, hidden),
    }


def block_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    p = case.params
    return {"x": randn((p["batch"] * p["seq"], p["hidden"]), case.dtype, device, gen), **_weights(case, device, gen)}


def decode_block_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """x (batch, hidden), one new token per sequence; the KV cache (batch, kv_heads, kv_len, head_dim) in
    sequence-first memory, as decode's inputs are, every sequence kv_len long: its last slot is where the
    block writes the new token (random values there until it does: a block that attends before writing is
    wrong)."""
    p = case.params
    inputs = {"x": randn((p["batch"], p["hidden"]), case.dtype, device, gen), **_weights(case, device, gen)}
    shape = (p["batch"], p["seq"], p["kv_heads"], p["head_dim"])
    inputs["k_cache"] = randn(shape, case.dtype, device, gen).transpose(1, 2)
    inputs["v_cache"] = randn(shape, case.dtype, device, gen).transpose(1, 2)
    inputs["cache_seqlens"] = torch.full((p["batch"],), p["seq"], dtype=torch.int32, device=device)
    return inputs


def options(case: Case) -> dict[str, Any]:
    """The layout the chain's glue needs; eps and scale for the block's own formula and reference (a composed
    chain's parts take theirs from their own ops' options)."""
    p = case.params
    layout = {"batch": p["batch"], "heads": p["heads"], "kv_heads": p["kv_heads"], "head_dim": p["head_dim"]}
    return {**layout, "eps": norm.RMS_NORM_EPS, "scale": 1.0 / math.sqrt(p["head_dim"])}


# -- the chain ------------------------------------------------------------------------------------------

# One function per part, its options bound: part name -> fn(*tensors).
PartFunctions = Mapping[str, Callable[..., Any]]


def _mlp(fns: PartFunctions, a: torch.Tensor, x: torch.Tensor, mlp_norm, w_gate_up, w_down) -> torch.Tensor:
    n, r = fns["add_norm"](a, x, mlp_norm)
    s = fns["swiglu"](fns["gate_up"](n, w_gate_up))
    return fns["residual"](fns["down"](s, w_down), r)


def prefill_chain(fns: PartFunctions) -> Callable[..., torch.Tensor]:
    """The block of prefill and training as a function of its op's signature, each part computed by `fns`."""

    def block(x, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down, batch, heads, kv_heads, head_dim, **_):
        tokens = x.shape[0] // batch
        qkv = fns["qkv"](fns["attn_norm"](x, attn_norm), w_qkv)
        o = fns["attention"](*split_heads(qkv, batch, tokens, heads, kv_heads, head_dim))
        return _mlp(fns, fns["o_proj"](merge_heads(o), w_o), x, mlp_norm, w_gate_up, w_down)

    return block


def decode_chain(fns: PartFunctions) -> Callable[..., torch.Tensor]:
    """The decode block: the new token's keys and values written into each sequence's last slot of the cache
    (cache_seqlens - 1), then attention over the cache."""

    def block(
        x, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down, k_cache, v_cache, cache_seqlens,
        batch, heads, kv_heads, head_dim, **_,
    ):  # fmt: skip
        qkv = fns["qkv"](fns["attn_norm"](x, attn_norm), w_qkv)
        q, k, v = split_heads(qkv, batch, 1, heads, kv_heads, head_dim)
        rows = torch.arange(batch, device=x.device)
        slot = cache_seqlens.long() - 1
        k_cache[rows, :, slot] = k[:, :, 0]
        v_cache[rows, :, slot] = v[:, :, 0]
        o = fns["attention"](q, k_cache, v_cache, cache_seqlens)
        return _mlp(fns, fns["o_proj"](merge_heads(o), w_o), x, mlp_norm, w_gate_up, w_down)

    return block


def part_ops() -> dict[str, Op]:
    """The ops a block's parts run, by name."""
    found = (norm.RMS_NORM, norm.ADD_RMS_NORM, matmul.OP, attention.OP, decode.OP, pointwise.SWIGLU)
    return {op.name: op for op in (*found, pointwise.RESIDUAL_ADD)}


def _default_sdpa(q, k, v, scale: float) -> torch.Tensor:
    """Attention as a user's eager block writes it: SDPA's own dispatch, causal, grouped K/V heads by
    enable_gqa (what the parts' `baseline` names: SDPA with a backend pinned)."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=k.shape[1] != q.shape[1])


def _default_sdpa_decode(q, k_cache, v_cache, cache_seqlens, scale: float) -> torch.Tensor:
    """Decode as SDPA runs it over full caches and one new token: nothing to mask."""
    return F.scaled_dot_product_attention(q, k_cache, v_cache, scale=scale, enable_gqa=k_cache.shape[1] != q.shape[1])


def _eager_functions(eps: float, scale: float, decoding: bool) -> dict[str, Callable[..., Any]]:
    """Each part's eager formula with its options (the same as the part ops' own: a test holds the chain of
    the parts' references to the block's), attention by SDPA's default dispatch."""
    if decoding:
        attend = lambda q, k, v, lens: _default_sdpa_decode(q, k, v, lens, scale)  # noqa: E731
    else:
        attend = lambda q, k, v: _default_sdpa(q, k, v, scale)  # noqa: E731
    return {
        "attn_norm": lambda t, w: norm.eager_rms_norm(t, w, eps),
        "qkv": matmul.eager_matmul,
        "attention": attend,
        "o_proj": matmul.eager_matmul,
        "add_norm": lambda a, r, w: norm.eager_add_rms_norm(a, r, w, eps),
        "gate_up": matmul.eager_matmul,
        "swiglu": pointwise.eager_swiglu,
        "down": matmul.eager_matmul,
        "residual": pointwise.eager_residual_add,
    }


def eager_block(x, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down, batch, heads, kv_heads, head_dim, eps, scale):
    """The block as eager PyTorch runs it (and torch.compile compiles it whole)."""
    block = prefill_chain(_eager_functions(eps, scale, decoding=False))
    return block(x, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down, batch, heads, kv_heads, head_dim)


def eager_decode_block(
    x, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down, k_cache, v_cache, cache_seqlens,
    batch, heads, kv_heads, head_dim, eps, scale,
):  # fmt: skip
    block = decode_chain(_eager_functions(eps, scale, decoding=True))
    return block(
        x, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down, k_cache, v_cache, cache_seqlens,
        batch, heads, kv_heads, head_dim,
    )  # fmt: skip


# -- work, tolerance, ops -----------------------------------------------------------------------------------


def work(case: Case) -> WorkModel:
    """The sum of the parts' work: each part's FLOPs and least bytes at its own pass."""
    ops = part_ops()
    found = [ops[part.case.op].work(part.case) for part in parts(case)]
    return WorkModel(sum(w.flops for w in found), sum(w.min_bytes for w in found))


# A block's own bounds (three times a single op's: its nine ops' errors add up), stated in suite/bounds.py,
# which says why, so that readers of records judge by them too.
TOLERANCE = own_tolerance("llama_block")

_BLOCK: dict[str, Any] = dict(
    family="model",
    work=work,
    options=options,
    parts=parts,
    tolerance=TOLERANCE,
)

BLOCK = Op(
    name="llama_block",
    tensors=("x", *WEIGHTS),
    make_inputs=block_inputs,
    reference=block_ref,
    formula=eager_block,
    grads=("x", *WEIGHTS),
    case=functools.partial(make_case, phase="prefill"),
    chain=prefill_chain,
    **_BLOCK,
)

DECODE_BLOCK = Op(
    name="llama_block_decode",
    tensors=("x", *WEIGHTS, "k_cache", "v_cache", "cache_seqlens"),
    make_inputs=decode_block_inputs,
    reference=decode_block_ref,
    formula=eager_decode_block,
    case=functools.partial(make_case, phase="decode"),
    chain=decode_chain,
    writes=("k_cache", "v_cache"),
    **_BLOCK,
)

FAMILY = Family(
    name="model",
    ops=(BLOCK, DECODE_BLOCK),
    schema=ModelConf,
    cases=cases,
    view=View("tflops", "TFLOP/s", "tokens per step", ("dtype", "model", "phase"), panels=(ModelPanel(),)),
    validate=validate,
    order=5,
)
