"""The vendor tier: PyTorch eager, i.e. cuBLAS, PyTorch's own norm kernels, and SDPA's pinned backends; for
the GEMM epilogue also cuBLASLt's own bias + GELU epilogue; for FP8, torch._scaled_mm (the op's formula)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..ops.attention import (
    RECOMPUTING_BACKWARD_PRODUCTS,
    TEXTBOOK_BACKWARD_PRODUCTS,
    bottom_right_mask,
    executed_flops,
)
from ..ops.base import Case, Op
from .base import Inputs, Provider, Unavailable, call_provider, needs_cuda

SDPA_BACKENDS = {
    "sdpa-flash": SDPBackend.FLASH_ATTENTION,
    "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
    "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
    "sdpa-math": SDPBackend.MATH,
}


def first_call(backend: SDPBackend, call: Callable[[], Any]) -> None:
    """Run `call` once: a backend that cannot take its inputs raises "No available kernel" and warns why,
    which becomes the provider's Unavailable reason."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call()
        except RuntimeError as exc:
            if "No available kernel" not in str(exc):
                raise
            why = "; ".join(str(w.message).strip() for w in caught) or str(exc)
            raise Unavailable(f"SDPA {backend.name} backend cannot run this case: {why}") from None


def _sdpa_arguments(q: torch.Tensor, k: torch.Tensor, causal: bool) -> tuple[bool, dict[str, Any]]:
    """is_causal and the extra arguments of SDPA for these shapes: grouped K/V heads need enable_gqa (multi-head
    cases make exactly the call they always made); a bottom-right causal mask where the lengths differ."""
    extra: dict[str, Any] = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}
    if causal and q.shape[2] != k.shape[2]:  # is_causal is top-left aligned: pass the bottom-right mask
        # Materialised: the causal_lower_right bias object's dispatch calls the flash or memory-efficient
        # kernels directly, past sdpa_kernel's pinning.
        extra["attn_mask"] = bottom_right_mask(q.shape[2], k.shape[2], q.device)
        causal = False
    return causal, extra


def _prepare_sdpa(backend: SDPBackend):
    def prepare(inputs: Inputs, options: dict[str, Any], case: Case):
        q, k, v = inputs["q"], inputs["k"], inputs["v"]
        causal, extra = _sdpa_arguments(q, k, options["causal"])
        scale = options["scale"]

        def call() -> torch.Tensor:
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, **extra)

        first_call(backend, call)
        return call

    return prepare


def sdpa_function(backend: SDPBackend):
    """SDPA with one backend pinned as a function of attention's signature (for a composed chain)."""

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float) -> torch.Tensor:
        is_causal, extra = _sdpa_arguments(q, k, causal)
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, **extra)

    return lambda case: attention


# What each backend executes, per pass (suite/ops/attention.py counts the products):
# - math: the textbook formula through autograd: the whole score matrix, masked afterwards when causal, and
#   the four products of its backward (P is saved by the forward, so nothing is recomputed);
# - flash (FlashAttention-2 on CUDA, aten's tiled kernel on the CPU), memory-efficient (the CUTLASS kernel
#   of xformers) and cuDNN: the forward saves only the row log-sum-exp, the backward recomputes q k^T tile
#   by tile (five products), and causal tiles above the diagonal are skipped in both passes.
SDPA_EXECUTES = {
    "sdpa-flash": (RECOMPUTING_BACKWARD_PRODUCTS, True),
    "sdpa-cudnn": (RECOMPUTING_BACKWARD_PRODUCTS, True),
    "sdpa-efficient": (RECOMPUTING_BACKWARD_PRODUCTS, True),
    "sdpa-math": (TEXTBOOK_BACKWARD_PRODUCTS, False),
}


def _sdpa_executed_flops(name: str):
    backward_products, skips_masked = SDPA_EXECUTES[name]
    return lambda case: executed_flops(case, backward_products, skips_masked)


def _sdpa_device_rule(name: str):
    def why_unavailable(case: Case, device: torch.device) -> str | None:
        # The math and flash backends have CPU kernels too; cuDNN and memory-efficient are CUDA-only here.
        if name in ("sdpa-cudnn", "sdpa-efficient"):
            return needs_cuda(device)
        return None

    return why_unavailable


CUBLASLT_EPILOGUE = "cublaslt-epilogue"


def _cublaslt_epilogue_why(case: Case, device: torch.device) -> str | None:
    """torch._addmm_activation(use_gelu=True): on CUDA, cuBLASLt's GELU_BIAS epilogue where cuBLASLt takes
    the operands (PyTorch's own gelu(tanh) after the GEMM where it does not); its GELU is the tanh form."""
    if reason := needs_cuda(device):
        return f"{reason}: torch._addmm_activation fuses the bias and GELU into cuBLASLt's epilogue on CUDA only"
    if case.params["activation"] != "gelu_tanh":
        return (
            f"cuBLASLt's GELU epilogue is the tanh approximation; this case is activation="
            f"{case.params['activation']} (exact GELU)"
        )
    if case.mode != "fwd":
        return "torch._addmm_activation has no autograd formula (forward only)"
    return None


def _cublaslt_epilogue_prepare(inputs: Inputs, options: dict[str, Any], case: Case):
    a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
    return lambda: torch._addmm_activation(bias, a, b, use_gelu=True)


def providers(ops: list[Op]) -> list[Provider]:
    out = [call_provider("eager", "vendor", op, op.formula) for op in ops if op.formula is not None and op.eager]
    if any(op.name == "attention" for op in ops):
        out += [
            Provider(
                name,
                "vendor",
                "attention",
                _prepare_sdpa(backend),
                _sdpa_device_rule(name),
                executed_flops=_sdpa_executed_flops(name),
                function=sdpa_function(backend),
            )
            for name, backend in SDPA_BACKENDS.items()
        ]
    if any(op.name == "matmul_bias_gelu" for op in ops):
        out.append(
            Provider(
                CUBLASLT_EPILOGUE, "vendor", "matmul_bias_gelu", _cublaslt_epilogue_prepare, _cublaslt_epilogue_why
            )
        )
    return out
