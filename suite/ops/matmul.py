"""matmul: C = A @ B, with A (M x K) and B (K x N) row-major."""

from __future__ import annotations

from typing import Any

import torch

from .base import Case, Op, WorkModel, choice_name, element_size, randn

# (role, rows of B, columns of B) of a transformer's projections, in units of (hidden, ffn).
_PROJECTIONS = (("attn_out", "hidden", "hidden"), ("up", "hidden", "ffn"), ("down", "ffn", "hidden"))


def cases(conf: Any) -> list[Case]:
    out: list[Case] = []
    shapes: list[tuple[str, int, int, int]] = [(f"{s}^3", s, s, s) for s in conf.square]
    for tokens in conf.tokens:
        for model in conf.models:
            sizes = {"hidden": model.hidden, "ffn": model.ffn}
            for role, k_name, n_name in _PROJECTIONS:
                k, n = sizes[k_name], sizes[n_name]
                shapes.append((f"{model.name}.{role} T={tokens}", tokens, k, n))
    for dtype in conf.dtypes:
        for mode in conf.modes:
            for label, m, k, n in shapes:
                params = {"m": m, "n": n, "k": k, "dtype": choice_name(dtype), "mode": choice_name(mode)}
                out.append(Case("matmul", "matmul", params, label, x=float(m * n * k) ** (1 / 3)))
    return out


def make_inputs(case: Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    p = case.params
    # Scaled so outputs stay O(1) whatever K is: fp16 does not overflow at K = 28672.
    scale = p["k"] ** -0.25
    return {
        "a": randn((p["m"], p["k"]), case.dtype, device, gen, scale=scale),
        "b": randn((p["k"], p["n"]), case.dtype, device, gen, scale=scale),
    }


def matmul_ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b in float64 on the CPU, float32 with TF32 off on the GPU (fast at 8192^3, exact enough)."""
    if a.device.type == "cpu":
        return a.double() @ b.double()
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return a.float() @ b.float()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def reference(inputs: dict[str, torch.Tensor], case: Case) -> torch.Tensor:
    return matmul_ref(inputs["a"], inputs["b"])


def work(case: Case) -> WorkModel:
    p = case.params
    m, n, k = p["m"], p["n"], p["k"]
    return WorkModel(flops=2.0 * m * n * k, min_bytes=float((m * k + k * n + m * n) * element_size(case)))


OP = Op(name="matmul", family="matmul", make_inputs=make_inputs, reference=reference, work=work)
