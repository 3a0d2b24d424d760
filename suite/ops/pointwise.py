"""Pointwise ops of a transformer block: SwiGLU's activation (Llama's gated MLP) and the residual add.

- silu_mul (SwiGLU's activation, silu(gate) · up, as serving engines name it): x (rows, 2·hidden), the
  gate/up projection's output with the gate in its first half and the up projection in its second, ->
  (rows, hidden). Backward: dx = [dy · up · silu'(gate), dy · silu(gate)].
- residual_add: x + residual, both (rows, hidden). Backward: dy to both inputs.
Bandwidth-bound, so the view is GB/s against elements; the model family measures both at a model's shapes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch
import torch.nn.functional as F

from .base import Case, DType, Family, Mode, Op, View, WorkModel, choice_name, element_size, per_pass, positive, randn


class PointwiseOp(Enum):
    silu_mul = "silu_mul"
    residual_add = "residual_add"


@dataclass
class PointwiseConf:
    enabled: bool = True
    ops: list[PointwiseOp] = field(default_factory=lambda: list(PointwiseOp))
    dtypes: list[DType] = field(default_factory=lambda: [DType.bf16])
    modes: list[Mode] = field(default_factory=lambda: [Mode.fwd])
    rows: list[int] = field(default_factory=list)
    # The output's width: silu_mul's (SwiGLU's intermediate size; its input is twice as wide), the residual's.
    hidden: list[int] = field(default_factory=list)


def validate(conf: Any) -> list[str]:
    return positive("pointwise", {"rows": conf.rows, "hidden": conf.hidden})


def make_case(op: str, rows: int, hidden: int, dtype: str, mode: str, label: str | None = None) -> Case:
    params = {"rows": rows, "hidden": hidden, "dtype": dtype, "mode": mode}
    return Case(op, "pointwise", params, label or f"{rows}x{hidden}", x=float(rows * hidden))


def cases(conf: Any) -> list[Case]:
    return [
        make_case(choice_name(op), rows, hidden, choice_name(dtype), choice_name(mode))
        for op in conf.ops
        for dtype in conf.dtypes
        for mode in conf.modes
        for rows in conf.rows
        for hidden in conf.hidden
    ]


def swiglu_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    # Spread over silu's bend and both tails.
    return {"x": randn((case.params["rows"], 2 * case.params["hidden"]), case.dtype, device, gen, scale=2.0)}


def residual_add_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    shape = (case.params["rows"], case.params["hidden"])
    return {"x": randn(shape, case.dtype, device, gen, scale=0.5), "residual": randn(shape, case.dtype, device, gen)}


def swiglu_ref(x: torch.Tensor) -> torch.Tensor:
    """silu(gate) · up, exact (float64 on the CPU, float32 on the GPU)."""
    hi = x.double() if x.device.type == "cpu" else x.float()
    gate, up = hi.chunk(2, dim=-1)
    return gate * torch.sigmoid(gate) * up


def residual_add_ref(x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    hi = torch.float64 if x.device.type == "cpu" else torch.float32
    return x.to(hi) + residual.to(hi)


def eager_swiglu(x: torch.Tensor) -> torch.Tensor:
    """What a Llama MLP runs in eager PyTorch: silu of the gate half, then the product with the up half."""
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up


def eager_residual_add(x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    return x + residual


def swiglu_work(case: Case) -> WorkModel:
    """fwd: both halves read, the product written (sigmoid, two multiplies: six FLOPs per output element,
    the exponential counted as one). bwd: both halves and dy read, dx (both halves) written, ten FLOPs."""
    rows, hidden = case.params["rows"], case.params["hidden"]
    size = element_size(case)
    fwd = WorkModel(6.0 * rows * hidden, float(3 * rows * hidden * size))
    bwd = WorkModel(10.0 * rows * hidden, float(5 * rows * hidden * size))
    return per_pass(case, fwd, bwd)


def residual_add_work(case: Case) -> WorkModel:
    """fwd: two inputs read, one output written, one FLOP each. bwd: nothing needs to move, both inputs'
    gradient is dy itself (autograd hands it on)."""
    n = case.params["rows"] * case.params["hidden"]
    return per_pass(case, WorkModel(float(n), float(3 * n * element_size(case))), WorkModel(0.0, 0.0))


SWIGLU = Op(
    name="silu_mul",
    family="pointwise",
    tensors=("x",),
    make_inputs=swiglu_inputs,
    reference=swiglu_ref,
    work=swiglu_work,
    formula=eager_swiglu,
    grads=("x",),
    kernel="swiglu",
    dynamic_dims={"x": (0,)},
    case=functools.partial(make_case, "silu_mul"),
)
RESIDUAL_ADD = Op(
    name="residual_add",
    family="pointwise",
    tensors=("x", "residual"),
    make_inputs=residual_add_inputs,
    reference=residual_add_ref,
    work=residual_add_work,
    formula=eager_residual_add,
    grads=("x", "residual"),
    kernel="residual_add",
    dynamic_dims={"x": (0,), "residual": (0,)},
    case=functools.partial(make_case, "residual_add"),
)

FAMILY = Family(
    name="pointwise",
    ops=(SWIGLU, RESIDUAL_ADD),
    schema=PointwiseConf,
    cases=cases,
    view=View("gbps", "GB/s", "elements (rows × hidden)"),
    validate=validate,
    order=4,
)
