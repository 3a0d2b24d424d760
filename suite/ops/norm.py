"""Row normalizations over the last dim: LayerNorm, RMSNorm, and the fused x + bias -> GELU -> LayerNorm."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from .base import Case, Op, WorkModel, choice_name, element_size, randn

LAYER_NORM_EPS = 1e-5
RMS_NORM_EPS = 1e-6


def cases_for(kind: str, conf: Any) -> list[Case]:
    out: list[Case] = []
    for dtype in conf.dtypes:
        for mode in conf.modes:
            for rows in conf.rows:
                for hidden in conf.hidden:
                    params = {"rows": rows, "hidden": hidden, "dtype": choice_name(dtype), "mode": choice_name(mode)}
                    out.append(Case(kind, "norm", params, f"{rows}x{hidden}", x=float(rows * hidden)))
    return out


def cases(conf: Any) -> list[Case]:
    return [c for kind in conf.kinds for c in cases_for(choice_name(kind), conf)]


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


def layer_norm_reference(inputs: dict[str, torch.Tensor], case: Case) -> torch.Tensor:
    return layer_norm_ref(inputs["x"], inputs["weight"], inputs["bias"])


def rms_norm_reference(inputs: dict[str, torch.Tensor], case: Case) -> torch.Tensor:
    return rms_norm_ref(inputs["x"], inputs["weight"])


def bias_gelu_layer_norm_reference(inputs: dict[str, torch.Tensor], case: Case) -> torch.Tensor:
    return bias_gelu_layer_norm_ref(inputs["x"], inputs["bias"], inputs["weight"], inputs["ln_bias"])


def _work(n_params: int, flops_per_element: float):
    def work(case: Case) -> WorkModel:
        rows, hidden = case.params["rows"], case.params["hidden"]
        # x read once and the output written once, plus the per-feature parameters read once.
        n_bytes = (2 * rows * hidden + n_params * hidden) * element_size(case)
        return WorkModel(flops=flops_per_element * rows * hidden, min_bytes=float(n_bytes))

    return work


LAYER_NORM = Op(
    "layer_norm",
    "norm",
    layer_norm_inputs,
    layer_norm_reference,
    _work(2, 8.0),
    options=lambda case: {"eps": LAYER_NORM_EPS},
)
RMS_NORM = Op(
    "rms_norm", "norm", rms_norm_inputs, rms_norm_reference, _work(1, 5.0), options=lambda case: {"eps": RMS_NORM_EPS}
)
BIAS_GELU_LAYER_NORM = Op(
    "bias_gelu_layer_norm",
    "norm",
    bias_gelu_layer_norm_inputs,
    bias_gelu_layer_norm_reference,
    _work(3, 20.0),
    options=lambda case: {"eps": LAYER_NORM_EPS},
)
