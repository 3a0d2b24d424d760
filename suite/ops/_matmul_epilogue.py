"""matmul_bias_gelu: gelu(a @ b + bias), the GEMM epilogue, with A (M x K), B (K x N) row-major, bias (N,).

Its cost over the plain matmul at the same shape is what fusing it saves or costs: the eager sequence writes
the (M, N) product and reads it back, a fused kernel applies the bias and GELU to its accumulator before the
one store. Backward: dz = dy * gelu'(a @ b + bias), dA = dz Bᵀ, dB = Aᵀ dz, dbias = dz summed over rows.
"""

from __future__ import annotations

from enum import Enum

import torch
import torch.nn.functional as F

from ..show.panels_format1 import EPILOGUE_COST
from ._gemm import matmul_ref
from .base import Case, Op, WorkModel, element_size, per_pass, randn

OP_NAME = "matmul_bias_gelu"

# The matmul page's table of what the epilogue costs over the plain product, per tier (torch-free, beside
# what older runs imply: suite/show/panels_format1.py).
COST = EPILOGUE_COST


class Activation(Enum):
    """The GELU's form: exact (erf, nn.GELU's default) or the tanh approximation."""

    gelu = "gelu"
    gelu_tanh = "gelu_tanh"


# A case's activation as torch.nn.functional.gelu's `approximate` (and tierbench.kernels.matmul_bias_gelu's).
APPROXIMATE = {"gelu": "none", "gelu_tanh": "tanh"}


def make_case(m: int, n: int, k: int, activation: str, dtype: str, mode: str, shape: str | None = None) -> Case:
    if activation not in APPROXIMATE:
        raise ValueError(f"{OP_NAME}: activation must be one of {', '.join(APPROXIMATE)}, got {activation!r}")
    params = {"m": m, "n": n, "k": k, "activation": activation, "dtype": dtype, "mode": mode}
    label = f"{shape or f'{m}x{n}x{k}'} {activation}"
    return Case(OP_NAME, "matmul", params, label, x=float(m * n * k) ** (1 / 3))


def make_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    p = case.params
    # Scaled as the plain matmul's: the pre-activations are O(1), where GELU bends.
    scale = p["k"] ** -0.25
    return {
        "a": randn((p["m"], p["k"]), case.dtype, device, gen, scale=scale),
        "b": randn((p["k"], p["n"]), case.dtype, device, gen, scale=scale),
        "bias": randn((p["n"],), case.dtype, device, gen, scale=0.5),
    }


def options(case: Case) -> dict[str, str]:
    return {"approximate": APPROXIMATE[case.params["activation"]]}


def matmul_bias_gelu_ref(
    a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, approximate: str = "none"
) -> torch.Tensor:
    """gelu(a @ b + bias) in float64 (CPU) / float32 with TF32 off (GPU), differentiable."""
    z = matmul_ref(a, b)
    return F.gelu(z + bias.to(z.dtype), approximate=approximate)


def eager_matmul_bias_gelu(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, approximate: str) -> torch.Tensor:
    """What nn.Linear followed by nn.GELU runs: addmm (cuBLAS, the bias in cuBLASLt's epilogue where it
    applies), then GELU as a kernel of its own that reads the product back."""
    return F.gelu(torch.addmm(bias, a, b), approximate=approximate)


def work(case: Case) -> WorkModel:
    """fwd: 2MNK, reading A, B and bias and writing the output once (the pre-activation never needs to reach
    memory). bwd: the two products (4MNK), reading A, B, dY and the saved pre-activation, writing dA, dB and
    dbias (a backward that recomputes the pre-activation instead does 2MNK more). fwd_bwd: both."""
    p = case.params
    m, n, k = p["m"], p["n"], p["k"]
    size = element_size(case)
    fwd = WorkModel(2.0 * m * n * k, float((m * k + k * n + n + m * n) * size))
    bwd = WorkModel(4.0 * m * n * k, float((2 * (m * k + k * n) + 2 * m * n + n) * size))
    return per_pass(case, fwd, bwd)


OP = Op(
    name=OP_NAME,
    family="matmul",
    tensors=("a", "b", "bias"),
    make_inputs=make_inputs,
    reference=matmul_bias_gelu_ref,
    work=work,
    formula=eager_matmul_bias_gelu,
    options=options,
    grads=("a", "b", "bias"),
    kernel="matmul_bias_gelu",
    dynamic_dims={"a": (0,)},
    case=make_case,
)
