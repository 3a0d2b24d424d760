"""The cuda tier's FP8 product: quack's Hopper GEMM, which takes FP8 operands and one scale for the product
(`alpha`), so per-tensor scales only."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from ..ops.base import Case, Op
from .base import Inputs, Provider
from .cuda_packages import CudaTierProvider, attribute, import_problem, on_gpu, package_version_of, too_old
from .cuda_quack import QUACK_INSTALL

# quack's GEMM: A (M, K) and B (K, N), both K-major for FP8 (the layouts matmul_fp8's inputs have), D =
# alpha * A @ B: one scale for the product, so per-tensor scales only.
QUACK_GEMM_MODULE = "quack.gemm_interface"


def _quack_fp8_why(case: Case, device: torch.device) -> str | None:
    if reason := import_problem(QUACK_GEMM_MODULE, QUACK_INSTALL):
        return reason
    fn = attribute(QUACK_GEMM_MODULE, "gemm")
    version = package_version_of(("quack-kernels",), module="quack")
    if not callable(fn):
        return f"quack-kernels {version} has no {QUACK_GEMM_MODULE}.gemm; upgrade: pip install -U quack-kernels"
    missing = [p for p in ("alpha", "out_dtype") if p not in inspect.signature(fn).parameters]
    if missing:
        return f"quack-kernels {version}: {QUACK_GEMM_MODULE}.gemm takes no {' or '.join(missing)}; upgrade it"
    if case.params["scaling"] != "per_tensor":
        return (
            f"quack's gemm takes one scale for the product (alpha), not scaling={case.params['scaling']} "
            f"(a scale per row of a and per column of b)"
        )
    cc = on_gpu(device)
    if isinstance(cc, str):
        return cc
    return too_old(cc, "quack's FP8 GEMM", (9, 0)) if cc < (9, 0) else None


def _quack_fp8_prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Callable[[], Any]:
    fn = attribute(QUACK_GEMM_MODULE, "gemm")
    a, b = inputs["a"], inputs["b"]
    # The two per-tensor scales as quack's one alpha: a one-element product, made once here.
    alpha = (inputs["scale_a"] * inputs["scale_b"]).reshape(1)
    out_dtype = options["out_dtype"]
    return lambda: fn(a, b, alpha=alpha, out_dtype=out_dtype)


def providers(ops: list[Op]) -> list[Provider]:
    if "matmul_fp8" not in {op.name for op in ops}:
        return []
    return [
        CudaTierProvider(
            "quack",
            "cuda",
            "matmul_fp8",
            _quack_fp8_prepare,
            _quack_fp8_why,
            package="quack-kernels",
            distributions=("quack-kernels",),
            version_module="quack",
        )
    ]
