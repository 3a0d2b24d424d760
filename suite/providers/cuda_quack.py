"""The cuda tier's RMSNorm and LayerNorm: quack (`quack-kernels`, CuTe DSL), which flash-attn 4 installs. Its
RMSNorm has a backward; its LayerNorm is a forward kernel only. Which cases it runs is read from quack's own
checks (quack/rmsnorm.py)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from ..ops.base import Case, Op
from .base import Inputs, Provider
from .cuda_packages import (
    CC,
    CudaTierProvider,
    attribute,
    dtype_problem,
    import_problem,
    on_gpu,
    package_version_of,
    too_old,
)


def quack_rule(cc: CC, dtype: str) -> str | None:
    """quack's README: H100 or B200/B300 (its 0.6 kernels also have SM8x/SM12x fallbacks, not advertised);
    x in fp16, bf16 or fp32."""
    if cc < (9, 0):
        return too_old(cc, "quack", (9, 0))
    return dtype_problem(dtype, "quack", ("fp16", "bf16", "fp32"))


QUACK_MODULE = "quack.rmsnorm"  # holds both rmsnorm and layernorm_fwd (`quack.rmsnorm` the attribute is the function)
QUACK_INSTALL = "pip install quack-kernels (quack-kernels[cu13] on CUDA 13; flash-attn-4 brings it)"
QUACK_FUNCTIONS = {"rms_norm": "rmsnorm", "layer_norm": "layernorm_fwd"}
# rmsnorm is a torch.autograd.Function (RMSNormFunction, its backward a CuTe-DSL kernel); layernorm_fwd is
# a forward kernel only: quack has no LayerNorm backward.
QUACK_BACKWARD = {"rms_norm": True, "layer_norm": False}


def _quack_function_problem(op: str) -> str | None:
    name = QUACK_FUNCTIONS[op]
    fn = attribute(QUACK_MODULE, name)
    version = package_version_of(("quack-kernels",), module="quack")
    if not callable(fn):
        # layernorm_fwd is in quack 0.2-0.3 and 0.6+, not in 0.4-0.5.
        return f"quack-kernels {version} has no {QUACK_MODULE}.{name}; upgrade: pip install -U quack-kernels"
    if op == "layer_norm" and "bias" not in inspect.signature(fn).parameters:
        return f"quack-kernels {version}: {QUACK_MODULE}.{name} takes no bias; upgrade: pip install -U quack-kernels"
    return None


def quack_backward_problem(op: str, version: str | None = None) -> str | None:
    """Why quack cannot run this op's backward (None: it can)."""
    if QUACK_BACKWARD[op]:
        return None
    version = version or package_version_of(("quack-kernels",), module="quack")
    return (
        f"no backward: quack-kernels {version} has a LayerNorm forward only "
        f"({QUACK_MODULE}.{QUACK_FUNCTIONS[op]}), no LayerNorm backward"
    )


def _quack_why(op: str) -> Callable[[Case, torch.device], str | None]:
    def why(case: Case, device: torch.device) -> str | None:
        if reason := import_problem(QUACK_MODULE, QUACK_INSTALL):
            return reason
        if reason := _quack_function_problem(op):
            return reason
        if case.mode != "fwd" and (reason := quack_backward_problem(op)):
            return reason
        cc = on_gpu(device)
        if isinstance(cc, str):
            return cc
        return quack_rule(cc, case.params["dtype"])

    return why


def _quack_prepare(op: str) -> Callable[[Inputs, dict[str, Any], Case], Callable[[], Any]]:
    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Callable[[], Any]:
        fn = attribute(QUACK_MODULE, QUACK_FUNCTIONS[op])
        x, eps = inputs["x"], float(options["eps"])
        if op == "rms_norm":
            weight = inputs["weight"]
            return lambda: fn(x, weight, eps=eps)
        # quack's LayerNorm asserts float32 weight and bias: cast once here (exact from fp16/bf16).
        weight, bias = inputs["weight"].float(), inputs["bias"].float()
        return lambda: fn(x, weight, bias, eps=eps)

    return prepare


def _quack_rms_norm_function(case: Case) -> Callable[..., torch.Tensor]:
    fn = attribute(QUACK_MODULE, QUACK_FUNCTIONS["rms_norm"])
    return lambda x, weight, eps: fn(x, weight, eps=eps)


def providers(ops: list[Op]) -> list[Provider]:
    names = {op.name for op in ops}
    return [
        CudaTierProvider(
            "quack",
            "cuda",
            op,
            _quack_prepare(op),
            _quack_why(op),
            package="quack-kernels",
            distributions=("quack-kernels",),
            version_module="quack",
            # quack's LayerNorm casts its weights per call: only its RMSNorm is a plain function.
            function=_quack_rms_norm_function if op == "rms_norm" else None,
        )
        for op in QUACK_FUNCTIONS
        if op in names
    ]
