"""The vendor tier: PyTorch eager, i.e. cuBLAS, PyTorch's own norm kernels, and SDPA's pinned backends."""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..ops.base import Case
from .base import Inputs, Prepared, Provider, Unavailable, needs_cuda


def eager_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.matmul(a, b)


def eager_layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def eager_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, x.shape[-1:], weight, eps)


def eager_bias_gelu_layer_norm(
    x: torch.Tensor, bias: torch.Tensor, weight: torch.Tensor, ln_bias: torch.Tensor, eps: float
) -> torch.Tensor:
    return F.layer_norm(F.gelu(x + bias), x.shape[-1:], weight, ln_bias, eps)


# The eager formulations, shared with the compiler tier (which compiles exactly these).
EAGER = {
    "matmul": lambda i, o: eager_matmul(i["a"], i["b"]),
    "layer_norm": lambda i, o: eager_layer_norm(i["x"], i["weight"], i["bias"], o["eps"]),
    "rms_norm": lambda i, o: eager_rms_norm(i["x"], i["weight"], o["eps"]),
    "bias_gelu_layer_norm": lambda i, o: eager_bias_gelu_layer_norm(
        i["x"], i["bias"], i["weight"], i["ln_bias"], o["eps"]
    ),
}


def _prepare_eager(op: str):
    fn = EAGER[op]

    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Prepared:
        return lambda: fn(inputs, options)

    return prepare


SDPA_BACKENDS = {
    "sdpa-flash": SDPBackend.FLASH_ATTENTION,
    "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
    "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
    "sdpa-math": SDPBackend.MATH,
}


def _prepare_sdpa(backend: SDPBackend):
    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Prepared:
        q, k, v = inputs["q"], inputs["k"], inputs["v"]
        causal, scale = options["causal"], options["scale"]

        def call() -> torch.Tensor:
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

        # A backend that cannot take these inputs raises "No available kernel" and warns why: keep the why.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                call()
            except RuntimeError as exc:
                if "No available kernel" not in str(exc):
                    raise
                why = "; ".join(str(w.message).strip() for w in caught) or str(exc)
                raise Unavailable(f"SDPA {backend.name} backend cannot run this case: {why}") from None
        return call

    return prepare


def _sdpa_device_rule(name: str):
    def why_unavailable(case: Case, device: torch.device) -> str | None:
        # The math and flash backends have CPU kernels too; cuDNN and memory-efficient are CUDA-only here.
        if name in ("sdpa-cudnn", "sdpa-efficient"):
            return needs_cuda(device)
        return None

    return why_unavailable


def providers() -> list[Provider]:
    out = [Provider("eager", "vendor", op, _prepare_eager(op)) for op in EAGER]
    out += [
        Provider(name, "vendor", "attention", _prepare_sdpa(backend), _sdpa_device_rule(name))
        for name, backend in SDPA_BACKENDS.items()
    ]
    return out
