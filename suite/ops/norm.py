"""Row normalizations over the last dim: LayerNorm, RMSNorm, the fused x + bias -> GELU -> LayerNorm, and the
residual add fused with RMSNorm (x + residual -> (RMSNorm of the sum, the sum)), as serving engines run a
transformer block's residual add and the norm after it."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch
import torch.nn.functional as F

from .base import Case, DType, Family, Mode, Op, View, WorkModel, choice_name, element_size, per_pass, positive, randn

LAYER_NORM_EPS = 1e-5
RMS_NORM_EPS = 1e-6


class NormKind(Enum):
    layer_norm = "layer_norm"
    rms_norm = "rms_norm"
    bias_gelu_layer_norm = "bias_gelu_layer_norm"
    add_rms_norm = "add_rms_norm"


@dataclass
class NormConf:
    enabled: bool = True
    kinds: list[NormKind] = field(default_factory=lambda: list(NormKind))
    dtypes: list[DType] = field(default_factory=lambda: [DType.bf16])
    modes: list[Mode] = field(default_factory=lambda: [Mode.fwd])
    rows: list[int] = field(default_factory=list)
    hidden: list[int] = field(default_factory=list)


def validate(conf: Any) -> list[str]:
    return positive("norm", {"rows": conf.rows, "hidden": conf.hidden})


def make_case(kind: str, rows: int, hidden: int, dtype: str, mode: str) -> Case:
    params = {"rows": rows, "hidden": hidden, "dtype": dtype, "mode": mode}
    return Case(kind, "norm", params, f"{rows}x{hidden}", x=float(rows * hidden))


def cases(conf: Any) -> list[Case]:
    return [
        make_case(choice_name(kind), rows, hidden, choice_name(dtype), choice_name(mode))
        for kind in conf.kinds
        for dtype in conf.dtypes
        for mode in conf.modes
        for rows in conf.rows
        for hidden in conf.hidden
    ]


def _x(case: Case, device: torch.device, gen: torch.Generator) -> torch.Tensor:
    p = case.params
    # Shifted so the mean matters: a LayerNorm that forgot to subtract it is caught.
    return randn((p["rows"], p["hidden"]), case.dtype, device, gen, scale=2.0, shift=0.5)


def _param(case: Case, device: torch.device, gen: torch.Generator, shift: float) -> torch.Tensor:
    return randn((case.params["hidden"],), case.dtype, device, gen, scale=0.2, shift=shift)


def layer_norm_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    return {
        "x": _x(case, device, gen),
        "weight": _param(case, device, gen, 1.0),
        "bias": _param(case, device, gen, 0.0),
    }


def rms_norm_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    return {"x": _x(case, device, gen), "weight": _param(case, device, gen, 1.0)}


def bias_gelu_layer_norm_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    return {
        "x": _x(case, device, gen),
        "bias": _param(case, device, gen, 0.0),
        "weight": _param(case, device, gen, 1.0),
        "ln_bias": _param(case, device, gen, 0.0),
    }


def add_rms_norm_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    # The residual stream carries the larger values; the block's output added to it is smaller.
    return {
        "x": randn((case.params["rows"], case.params["hidden"]), case.dtype, device, gen, scale=0.5),
        "residual": _x(case, device, gen),
        "weight": _param(case, device, gen, 1.0),
    }


def _hi(t: torch.Tensor | None) -> torch.Tensor | None:
    """float64 on the CPU, float32 on the GPU (float64 is slow there; float32 is ample for 16-bit outputs)."""
    if t is None:
        return None
    return t.double() if t.device.type == "cpu" else t.float()


# The references, on plain tensors: shared by the suite, the asv benchmarks and the kernel tests.
def layer_norm_ref(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float = LAYER_NORM_EPS
) -> torch.Tensor:
    x = _hi(x)
    return F.layer_norm(x, x.shape[-1:], _hi(weight), _hi(bias), eps)


def rms_norm_ref(x: torch.Tensor, weight: torch.Tensor | None, eps: float = RMS_NORM_EPS) -> torch.Tensor:
    x = _hi(x)
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * _hi(weight)


def bias_gelu_layer_norm_ref(
    x: torch.Tensor,
    bias: torch.Tensor,
    weight: torch.Tensor | None,
    ln_bias: torch.Tensor | None,
    eps: float = LAYER_NORM_EPS,
) -> torch.Tensor:
    h = _hi(x) + _hi(bias)
    h = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))  # exact GELU
    return F.layer_norm(h, h.shape[-1:], _hi(weight), _hi(ln_bias), eps)


def add_rms_norm_ref(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = RMS_NORM_EPS
) -> tuple[torch.Tensor, torch.Tensor]:
    """(RMSNorm(x + residual) · weight, x + residual), exact."""
    total = _hi(x) + _hi(residual)
    return rms_norm_ref(total, weight, eps), total


# The eager formulations (the vendor tier runs them, the compiler tier compiles them).
def eager_layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def eager_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, x.shape[-1:], weight, eps)


def eager_bias_gelu_layer_norm(
    x: torch.Tensor, bias: torch.Tensor, weight: torch.Tensor, ln_bias: torch.Tensor, eps: float
) -> torch.Tensor:
    return F.layer_norm(F.gelu(x + bias), x.shape[-1:], weight, ln_bias, eps)


def eager_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The unfused pair: the sum written, then read back by the norm."""
    total = x + residual
    return F.rms_norm(total, total.shape[-1:], weight, eps), total


def _add_rms_norm_work(case: Case) -> WorkModel:
    """fwd: x and residual read, both results written, the weight read (one FLOP to add, five to normalize per
    element). bwd: the sum, dout, d(sum) and the weight read, one gradient written (both inputs' gradient is the
    same tensor) and dweight (ten FLOPs per element)."""
    rows, hidden = case.params["rows"], case.params["hidden"]
    size = element_size(case)
    fwd = WorkModel(6.0 * rows * hidden, float((4 * rows * hidden + hidden) * size))
    bwd = WorkModel(10.0 * rows * hidden, float((4 * rows * hidden + 2 * hidden) * size))
    return per_pass(case, fwd, bwd)


def _work(n_params: int, fwd_flops: float, bwd_flops: float):
    """fwd: x read and the output written once, the per-feature parameters read once. bwd: x, dy and the
    parameters read, dx written, one gradient per parameter written (reduced over the rows)."""

    def work(case: Case) -> WorkModel:
        rows, hidden = case.params["rows"], case.params["hidden"]
        size = element_size(case)
        fwd = WorkModel(fwd_flops * rows * hidden, float((2 * rows * hidden + n_params * hidden) * size))
        bwd = WorkModel(bwd_flops * rows * hidden, float((3 * rows * hidden + 2 * n_params * hidden) * size))
        return per_pass(case, fwd, bwd)

    return work


def _eps(value: float):
    return lambda case: {"eps": value}


LAYER_NORM = Op(
    name="layer_norm",
    family="norm",
    tensors=("x", "weight", "bias"),
    make_inputs=layer_norm_inputs,
    reference=layer_norm_ref,
    work=_work(2, 8.0, 14.0),
    formula=eager_layer_norm,
    options=_eps(LAYER_NORM_EPS),
    grads=("x", "weight", "bias"),
    kernel="layer_norm",
    dynamic_dims={"x": (0,)},
    case=functools.partial(make_case, "layer_norm"),
)
RMS_NORM = Op(
    name="rms_norm",
    family="norm",
    tensors=("x", "weight"),
    make_inputs=rms_norm_inputs,
    reference=rms_norm_ref,
    work=_work(1, 5.0, 10.0),
    formula=eager_rms_norm,
    options=_eps(RMS_NORM_EPS),
    grads=("x", "weight"),
    kernel="rms_norm",
    dynamic_dims={"x": (0,)},
    case=functools.partial(make_case, "rms_norm"),
)
BIAS_GELU_LAYER_NORM = Op(
    name="bias_gelu_layer_norm",
    family="norm",
    tensors=("x", "bias", "weight", "ln_bias"),
    make_inputs=bias_gelu_layer_norm_inputs,
    reference=bias_gelu_layer_norm_ref,
    work=_work(3, 20.0, 34.0),
    formula=eager_bias_gelu_layer_norm,
    options=_eps(LAYER_NORM_EPS),
    grads=("x", "bias", "weight", "ln_bias"),
    kernel="bias_gelu_layer_norm",
    dynamic_dims={"x": (0,)},
    case=functools.partial(make_case, "bias_gelu_layer_norm"),
)

ADD_RMS_NORM = Op(
    name="add_rms_norm",
    family="norm",
    tensors=("x", "residual", "weight"),
    make_inputs=add_rms_norm_inputs,
    reference=add_rms_norm_ref,
    work=_add_rms_norm_work,
    formula=eager_add_rms_norm,
    options=_eps(RMS_NORM_EPS),
    grads=("x", "residual", "weight"),
    kernel="add_rms_norm",
    dynamic_dims={"x": (0,), "residual": (0,)},
    case=functools.partial(make_case, "add_rms_norm"),
    results=("out", "residual_out"),
)

FAMILY = Family(
    name="norm",
    ops=(LAYER_NORM, RMS_NORM, BIAS_GELU_LAYER_NORM, ADD_RMS_NORM),
    schema=NormConf,
    cases=cases,
    view=View("gbps", "GB/s", "elements (rows × hidden)"),
    validate=validate,
    order=1,
)
