"""matmul: C = A @ B, with A (M x K) and B (K x N) row-major; backward dA = dC Bᵀ, dB = Aᵀ dC."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .base import Case, DType, Family, Mode, Op, View, WorkModel, choice_name, element_size, per_pass, positive, randn

# (role, rows of B, columns of B) of a transformer's projections, in units of (hidden, ffn).
_PROJECTIONS = (("attn_out", "hidden", "hidden"), ("up", "hidden", "ffn"), ("down", "ffn", "hidden"))


@dataclass
class ModelShape:
    """A transformer's projection sizes: matmuls (tokens x hidden) @ (hidden x ffn) and back."""

    name: str = "???"
    hidden: int = 4096
    ffn: int = 14336


@dataclass
class MatmulConf:
    enabled: bool = True
    dtypes: list[DType] = field(default_factory=lambda: [DType.bf16])
    modes: list[Mode] = field(default_factory=lambda: [Mode.fwd])
    square: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    models: list[ModelShape] = field(default_factory=list)


def validate(conf: Any) -> list[str]:
    problems = positive("matmul", {"square": conf.square, "tokens": conf.tokens})
    for model in conf.models:
        problems += positive(f"matmul.models[{model.name}]", {"hidden": model.hidden, "ffn": model.ffn})
    return problems


def make_case(m: int, n: int, k: int, dtype: str, mode: str, label: str | None = None) -> Case:
    params = {"m": m, "n": n, "k": k, "dtype": dtype, "mode": mode}
    return Case("matmul", "matmul", params, label or f"{m}x{n}x{k}", x=float(m * n * k) ** (1 / 3))


def cases(conf: Any) -> list[Case]:
    shapes: list[tuple[str, int, int, int]] = [(f"{s}^3", s, s, s) for s in conf.square]
    for tokens in conf.tokens:
        for model in conf.models:
            sizes = {"hidden": model.hidden, "ffn": model.ffn}
            for role, k_name, n_name in _PROJECTIONS:
                k, n = sizes[k_name], sizes[n_name]
                shapes.append((f"{model.name}.{role} T={tokens}", tokens, k, n))
    return [
        make_case(m, n, k, choice_name(dtype), choice_name(mode), label)
        for dtype in conf.dtypes
        for mode in conf.modes
        for label, m, k, n in shapes
    ]


def make_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    p = case.params
    # Scaled so outputs stay O(1) whatever K is: fp16 does not overflow at K = 28672.
    scale = p["k"] ** -0.25
    return {
        "a": randn((p["m"], p["k"]), case.dtype, device, gen, scale=scale),
        "b": randn((p["k"], p["n"]), case.dtype, device, gen, scale=scale),
    }


def matmul_ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b in float64 on the CPU, float32 with TF32 off on the GPU (fast at 8192^3, exact enough)."""
    if a.device.type == "cpu":
        return a.double() @ b.double()
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return a.float() @ b.float()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def eager_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.matmul(a, b)


def work(case: Case) -> WorkModel:
    """fwd: 2MNK, reading A and B and writing C once. bwd: two products (4MNK), reading A, B and dC and
    writing dA and dB. fwd_bwd: both passes, each at its own minimum."""
    p = case.params
    m, n, k = p["m"], p["n"], p["k"]
    size = element_size(case)
    fwd = WorkModel(2.0 * m * n * k, float((m * k + k * n + m * n) * size))
    bwd = WorkModel(4.0 * m * n * k, float((2 * (m * k + k * n) + m * n) * size))
    return per_pass(case, fwd, bwd)


OP = Op(
    name="matmul",
    family="matmul",
    tensors=("a", "b"),
    make_inputs=make_inputs,
    reference=matmul_ref,
    work=work,
    formula=eager_matmul,
    grads=("a", "b"),
    kernel="matmul",
    baseline=("eager",),
    # The token dim varies along a suite; K and N are the model's.
    dynamic_dims={"a": (0,)},
    case=make_case,
)

FAMILY = Family(
    name="matmul",
    ops=(OP,),
    schema=MatmulConf,
    cases=cases,
    view=View("tflops", "TFLOP/s", "size: cube root of M·N·K"),
    validate=validate,
    order=0,
)
