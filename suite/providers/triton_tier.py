"""The triton tier: tierbench's own Triton kernels (tierbench.kernels)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from ..ops import OPS
from ..ops.base import Case
from .base import Inputs, Prepared, Provider, missing_module


def interpreted() -> bool:
    """True when Triton runs kernels through its CPU interpreter (checked, never timed as comparable)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def _why_unavailable(case: Case, device: torch.device) -> str | None:
    reason = missing_module("triton", "triton")
    if reason:
        return reason
    if device.type == "cpu" and not interpreted():
        return "needs a CUDA GPU, or TRITON_INTERPRET=1 to check the kernels on the CPU"
    if case.op == "attention" and case.params["dtype"] not in ("fp16", "bf16"):
        return f"dtype {case.params['dtype']} unsupported: the triton attention kernel takes fp16 and bf16"
    return None


# (kernels module, inputs, options) -> the call to time.
_CALLS: dict[str, Callable[[Any, Inputs, dict[str, Any]], Prepared]] = {
    "matmul": lambda K, i, o: lambda: K.matmul(i["a"], i["b"]),
    "layer_norm": lambda K, i, o: lambda: K.layer_norm(i["x"], i["weight"], i["bias"], eps=o["eps"]),
    "rms_norm": lambda K, i, o: lambda: K.rms_norm(i["x"], i["weight"], eps=o["eps"]),
    "bias_gelu_layer_norm": lambda K, i, o: (
        lambda: K.bias_gelu_layer_norm(i["x"], i["bias"], i["weight"], i["ln_bias"], eps=o["eps"])
    ),
    "attention": lambda K, i, o: lambda: K.attention(i["q"], i["k"], i["v"], causal=o["causal"], scale=o["scale"]),
}


def _prepare(op: str):
    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Prepared:
        from tierbench import kernels  # imported late: Triton reads TRITON_INTERPRET when kernels are defined

        return _CALLS[op](kernels, inputs, options)

    return prepare


def _describe_launch(op: str) -> Callable[[], str | None]:
    def describe() -> str | None:
        from tierbench.kernels._common import last_launch

        return last_launch(OPS[op].family)  # tierbench.kernels keeps one launch log per op family

    return describe


def providers() -> list[Provider]:
    return [
        Provider(
            "triton",
            "triton",
            op,
            _prepare(op),
            _why_unavailable,
            package="triton",
            describe_launch=_describe_launch(op),
        )
        for op in _CALLS
    ]
