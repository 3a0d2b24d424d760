"""The matmul family: C = A @ B, the same product with a fused bias + GELU epilogue, and the FP8 product.

- matmul: A (M x K) and B (K x N) row-major; backward dA = dC Bᵀ, dB = Aᵀ dC.
- matmul_bias_gelu: gelu(A @ B + bias), exact or tanh GELU (_matmul_epilogue.py).
- matmul_fp8: scaled FP8 operands, a bf16 output, per-tensor or per-row scales (_matmul_fp8.py).
One config section makes all three: `ops` picks the 16/32-bit ops, an fp8 entry of `dtypes` the FP8
product, over the same shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch

from . import _matmul_epilogue as epilogue
from . import _matmul_fp8 as fp8
from ._gemm import matmul_ref
from ._matmul_epilogue import Activation
from ._matmul_fp8 import Scaling
from .base import Case, Family, Mode, Op, View, WorkModel, choice_name, element_size, per_pass, positive, randn

__all__ = ["FAMILY", "OP", "matmul_ref"]

# (role, rows of B, columns of B) of a transformer's projections, in units of (hidden, ffn).
_PROJECTIONS = (("attn_out", "hidden", "hidden"), ("up", "hidden", "ffn"), ("down", "ffn", "hidden"))


class MatmulOp(Enum):
    """The 16/32-bit ops a section runs; the FP8 product comes with an fp8 entry of `dtypes`."""

    matmul = "matmul"
    matmul_bias_gelu = "matmul_bias_gelu"


class MatmulDType(Enum):
    """fp16, bf16, fp32: a, b and the output of that dtype. fp8_e4m3: the FP8 product (op matmul_fp8),
    e4m3 operands and a bf16 output, forward only, one case per `fp8_scalings` entry."""

    fp16 = "fp16"
    bf16 = "bf16"
    fp32 = "fp32"
    fp8_e4m3 = "fp8_e4m3"


FP8_DTYPES = frozenset({"fp8_e4m3"})


@dataclass
class ModelShape:
    """A transformer's projection sizes: matmuls (tokens x hidden) @ (hidden x ffn) and back."""

    name: str = "???"
    hidden: int = 4096
    ffn: int = 14336


@dataclass
class MatmulConf:
    enabled: bool = True
    ops: list[MatmulOp] = field(default_factory=lambda: [MatmulOp.matmul])
    dtypes: list[MatmulDType] = field(default_factory=lambda: [MatmulDType.bf16])
    modes: list[Mode] = field(default_factory=lambda: [Mode.fwd])
    square: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    models: list[ModelShape] = field(default_factory=list)
    # The GELU forms of matmul_bias_gelu.
    activations: list[Activation] = field(default_factory=lambda: list(Activation))
    # The scaling recipes of matmul_fp8.
    fp8_scalings: list[Scaling] = field(default_factory=lambda: list(Scaling))


def validate(conf: Any) -> list[str]:
    problems = positive("matmul", {"square": conf.square, "tokens": conf.tokens})
    for model in conf.models:
        problems += positive(f"matmul.models[{model.name}]", {"hidden": model.hidden, "ffn": model.ffn})
    ops = [choice_name(o) for o in conf.ops]
    dtypes = [choice_name(d) for d in conf.dtypes]
    wanted = ", ".join(d for d in dtypes if d in FP8_DTYPES)
    if wanted and "matmul" not in ops:
        problems.append(f"matmul.dtypes has {wanted}, the FP8 product, which comes with matmul.ops including matmul")
    if wanted and "fwd" not in [choice_name(m) for m in conf.modes]:
        problems.append(f"matmul.dtypes has {wanted}: the FP8 product is forward only, and matmul.modes has no fwd")
    if wanted and not conf.fp8_scalings:
        problems.append(f"matmul.dtypes has {wanted} but matmul.fp8_scalings is empty")
    if "matmul_bias_gelu" in ops and not conf.activations:
        problems.append("matmul.ops has matmul_bias_gelu but matmul.activations is empty")
    return problems


def make_case(m: int, n: int, k: int, dtype: str, mode: str, label: str | None = None) -> Case:
    params = {"m": m, "n": n, "k": k, "dtype": dtype, "mode": mode}
    return Case("matmul", "matmul", params, label or f"{m}x{n}x{k}", x=float(m * n * k) ** (1 / 3))


def shapes(conf: Any) -> list[tuple[str, int, int, int]]:
    """(label, M, K, N): the squares, then each model's projections at each token count."""
    out: list[tuple[str, int, int, int]] = [(f"{s}^3", s, s, s) for s in conf.square]
    for tokens in conf.tokens:
        for model in conf.models:
            sizes = {"hidden": model.hidden, "ffn": model.ffn}
            for role, k_name, n_name in _PROJECTIONS:
                k, n = sizes[k_name], sizes[n_name]
                out.append((f"{model.name}.{role} T={tokens}", tokens, k, n))
    return out


def cases(conf: Any) -> list[Case]:
    """The plain matmul's cases first (in the order they always had), then the epilogue's, then FP8's."""
    ops = [choice_name(o) for o in conf.ops]
    dtypes = [choice_name(d) for d in conf.dtypes]
    modes = [choice_name(m) for m in conf.modes]
    wide = [d for d in dtypes if d not in FP8_DTYPES]
    sizes = shapes(conf)
    out = []
    if "matmul" in ops:
        out += [make_case(m, n, k, dtype, mode, label) for dtype in wide for mode in modes for label, m, k, n in sizes]
    if "matmul_bias_gelu" in ops:
        out += [
            epilogue.make_case(m, n, k, choice_name(act), dtype, mode, label)
            for dtype in wide
            for mode in modes
            for act in conf.activations
            for label, m, k, n in sizes
        ]
    if "matmul" in ops and "fwd" in modes:
        out += [
            fp8.make_case(m, n, k, choice_name(scaling), dtype, "fwd", label)
            for dtype in dtypes
            if dtype in FP8_DTYPES
            for scaling in conf.fp8_scalings
            for label, m, k, n in sizes
        ]
    return out


def make_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    p = case.params
    # Scaled so outputs stay O(1) whatever K is: fp16 does not overflow at K = 28672.
    scale = p["k"] ** -0.25
    return {
        "a": randn((p["m"], p["k"]), case.dtype, device, gen, scale=scale),
        "b": randn((p["k"], p["n"]), case.dtype, device, gen, scale=scale),
    }


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
    # The token dim varies along a suite; K and N are the model's.
    dynamic_dims={"a": (0,)},
    case=make_case,
)

FAMILY = Family(
    name="matmul",
    ops=(OP, epilogue.OP, fp8.OP),
    schema=MatmulConf,
    cases=cases,
    # The epilogue's GELU form and FP8's scaling recipe split charts too (plain matmul cases have neither).
    view=View(
        "tflops", "TFLOP/s", "size: cube root of M·N·K", ("dtype", "activation", "scaling"), panels=(epilogue.COST,)
    ),
    validate=validate,
    order=0,
)
