"""matmul_fp8: out = (a * scale_a) @ (b * scale_b), FP8 operands, a bf16 output, forward only.

The scaling recipe (the case's `scaling`): real value = fp8 value * scale, the scales float32, chosen so
that the largest magnitude they cover maps to the format's largest finite value (amax / 448 for e4m3):
- per_tensor: one scale for a and one for b;
- per_row: one scale per row of a (shape (M, 1)) and one per column of b (shape (1, N)), the layout
  torch._scaled_mm calls rowwise.
The inputs are the quantised operands and their scales, made from random float32 data by that recipe:
a (M, K) row-major and b (K, N) column-major (b = bt.T for a row-major bt (N, K)), both K-major as
Hopper's FP8 tensor cores read them. The reference is the float64 (CPU) / float32 (GPU) product of the
dequantised operands, so the format's rounding is the inputs' own and not an error of any provider; the
check's tolerance is the output's, plus room for FP8 accumulation (suite/measure/checking.py).

Forward only: an FP8 backward is a training recipe of its own (gradients quantised per step, usually to
e5m2, against e4m3 operands), not the derivative of this forward; e5m2 operands are left out with it
(cuBLASLt has no e5m2 x e5m2 product).
"""

from __future__ import annotations

from enum import Enum

import torch

from ._gemm import matmul_ref
from .base import Case, Op, WorkModel, hi_precision

OP_NAME = "matmul_fp8"
OUT_DTYPE = "bf16"
# The largest finite value of each FP8 format: the recipe's amax maps onto it.
FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
# The least FP8 compute capability: Ada (8.9) and newer have FP8 tensor cores.
FP8_COMPUTE_CAPABILITY = (8, 9)


class Scaling(Enum):
    per_tensor = "per_tensor"
    per_row = "per_row"


SCALINGS = tuple(s.value for s in Scaling)


def make_case(m: int, n: int, k: int, scaling: str, dtype: str = "fp8_e4m3", mode: str = "fwd",
              shape: str | None = None) -> Case:  # fmt: skip
    if scaling not in SCALINGS:
        raise ValueError(f"{OP_NAME}: scaling must be one of {', '.join(SCALINGS)}, got {scaling!r}")
    if mode != "fwd":
        raise ValueError(f"{OP_NAME}: mode must be fwd (the FP8 matmul is measured forward only), got {mode!r}")
    params = {"m": m, "n": n, "k": k, "scaling": scaling, "dtype": dtype, "out_dtype": OUT_DTYPE, "mode": mode}
    label = f"{shape or f'{m}x{n}x{k}'} {scaling}"
    return Case(OP_NAME, "matmul", params, label, x=float(m * n * k) ** (1 / 3))


def quantise(x: torch.Tensor, fmt: torch.dtype, per_row: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """x ~ q * scale with scale = amax / fp8 max, over the whole tensor or per row (kept as (rows, 1))."""
    amax = x.abs().amax(dim=1, keepdim=True) if per_row else x.abs().amax()
    scale = (amax.float() / FP8_MAX[fmt]).clamp_min(1e-12)
    return (x / scale).to(fmt), scale


def make_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    p = case.params
    per_row = p["scaling"] == "per_row"
    fmt = case.dtype
    x = torch.randn((p["m"], p["k"]), generator=gen, device=gen.device).to(device)
    # Rows of different magnitudes, so that per-row scales differ and a scale applied to the wrong row shows.
    x = x * torch.rand((p["m"], 1), generator=gen, device=gen.device).to(device).add_(0.5)
    bt = torch.randn((p["n"], p["k"]), generator=gen, device=gen.device).to(device) * p["k"] ** -0.5
    a, scale_a = quantise(x, fmt, per_row)
    b_rows, scale_b = quantise(bt, fmt, per_row)
    return {"a": a, "b": b_rows.T, "scale_a": scale_a, "scale_b": scale_b.reshape(1, -1) if per_row else scale_b}


def options(case: Case) -> dict[str, torch.dtype]:
    return {"out_dtype": case.out_dtype}


def matmul_fp8_ref(
    a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, out_dtype: torch.dtype
) -> torch.Tensor:
    """The product of the dequantised operands, float64 (CPU) / float32 with TF32 off (GPU)."""
    hi = hi_precision(a.device)
    return matmul_ref(a.to(hi) * scale_a.to(hi), b.to(hi) * scale_b.to(hi))


def scaled_matmul(
    a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, out_dtype: torch.dtype
) -> torch.Tensor:
    """torch._scaled_mm: cuBLASLt's FP8 GEMM, the scales applied in its epilogue (what compile compiles)."""
    return torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)


def work(case: Case) -> WorkModel:
    """2MNK; a and b read once (one byte an element), the scales read, the bf16 output written once."""
    p = case.params
    m, n, k = p["m"], p["n"], p["k"]
    scales = m + n if p["scaling"] == "per_row" else 2
    out_size = torch.empty((), dtype=case.out_dtype).element_size()
    return WorkModel(2.0 * m * n * k, float(m * k + k * n + 4 * scales + m * n * out_size))


def device_problem(case: Case, device: torch.device) -> str | None:
    """FP8 products need FP8 tensor cores: no provider runs one on a CPU or an older GPU."""
    need = FP8_COMPUTE_CAPABILITY
    if device.type != "cuda":
        return (
            f"FP8 matmul needs FP8 tensor cores: a CUDA GPU of compute capability {need[0]}.{need[1]} or newer "
            f"(running on {device.type})"
        )
    cc = torch.cuda.get_device_capability(device)
    if cc < need:
        return (
            f"compute capability {cc[0]}.{cc[1]} has no FP8 tensor cores: FP8 matmul needs {need[0]}.{need[1]} or newer"
        )
    return None


OP = Op(
    name=OP_NAME,
    family="matmul",
    tensors=("a", "b", "scale_a", "scale_b"),
    make_inputs=make_inputs,
    reference=matmul_fp8_ref,
    work=work,
    formula=scaled_matmul,
    options=options,
    kernel="matmul_fp8",
    dynamic_dims={"a": (0,)},
    case=make_case,
    why_unavailable=device_problem,
)
