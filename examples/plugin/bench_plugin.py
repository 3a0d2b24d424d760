"""A tierbench plugin: the user's SwiGLU op (a plain PyTorch formula) and the user's kernels, as providers of
SwiGLU (Triton, forward and backward; plain PyTorch a block of rows at a time) and of tierbench's own LayerNorm
and RMSNorm ops.

    tierbench run plugins=[bench_plugin] suite=swiglu               # the SwiGLU family alone
    tierbench run plugins=[bench_plugin] suite=norm 'providers=[eager,compile,my-layernorm,my-rmsnorm]'
    tierbench compare --plugin-versions OLD NEW suite=swiglu        # two versions of these kernels, A/B
    tierbench nightly --head                                        # this repository's history (asv.conf.json)

tierbench imports this module by name (from the current folder, or installed: `pip install .` here
registers it under the `tierbench.plugins` entry points, see pyproject.toml) and reads FAMILIES, PROVIDERS
and TIERS. Everything downstream (check, timing, records, summary, report, asv) treats them as its own.
docs/plugins.md of tierbench is the reference: every built-in op's signature, the helpers used below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import my_kernels
import torch
import torch.nn.functional as F

import tierbench
from tierbench import DType, Mode, choice_name, element_size, hi_precision, per_pass, positive, randn


# --- an op of the user's: SwiGLU, silu(gate) * up ------------------------------------------------------
@dataclass
class SwigluConf:
    """The `swiglu.*` config section (its defaults are what a suite without the section runs)."""

    enabled: bool = True
    dtypes: list[DType] = field(default_factory=lambda: [DType.bf16])
    modes: list[Mode] = field(default_factory=lambda: [Mode.fwd, Mode.bwd])
    tokens: list[int] = field(default_factory=lambda: [256])
    ffn: list[int] = field(default_factory=lambda: [512])


def make_case(tokens: int, ffn: int, dtype: str, mode: str) -> tierbench.Case:
    params = {"tokens": tokens, "ffn": ffn, "dtype": dtype, "mode": mode}
    return tierbench.Case("swiglu", "swiglu", params, f"{tokens}x{ffn}", x=float(tokens * ffn))


def cases(conf: Any) -> list[tierbench.Case]:
    return [
        make_case(t, f, choice_name(d), choice_name(m))
        for d in conf.dtypes
        for m in conf.modes
        for t in conf.tokens
        for f in conf.ffn
    ]


def make_inputs(case: tierbench.Case, device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    shape = (case.params["tokens"], case.params["ffn"])
    return {"gate": randn(shape, case.dtype, device, gen), "up": randn(shape, case.dtype, device, gen)}


def reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """In float64 on a CPU, float32 on a GPU; autograd on it gives the gradients the backward is checked by."""
    hi = hi_precision(gate.device)
    g = gate.to(hi)
    return g * torch.sigmoid(g) * up.to(hi)


def formula(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.silu(gate) * up


def work(case: tierbench.Case) -> tierbench.WorkModel:
    n = case.params["tokens"] * case.params["ffn"]
    size = element_size(case)
    fwd = tierbench.WorkModel(flops=5.0 * n, min_bytes=3.0 * n * size)  # gate and up read, the output written
    bwd = tierbench.WorkModel(flops=8.0 * n, min_bytes=5.0 * n * size)  # gate, up, dy read; dgate, dup written
    return per_pass(case, fwd, bwd)


SWIGLU = tierbench.Op(
    name="swiglu",
    family="swiglu",
    tensors=("gate", "up"),
    make_inputs=make_inputs,
    reference=reference,
    work=work,
    formula=formula,  # the vendor tier runs it as `eager`, the compiler tier compiles it
    grads=("gate", "up"),
    dynamic_dims={"gate": (0,), "up": (0,)},
    case=make_case,
)

FAMILIES = [
    tierbench.Family(
        name="swiglu",
        ops=(SWIGLU,),
        schema=SwigluConf,
        cases=cases,
        view=tierbench.View("gbps", "GB/s", "elements (tokens × ffn)"),
        validate=lambda conf: positive("swiglu", {"tokens": conf.tokens, "ffn": conf.ffn}),
    )
]

# --- the user's kernels, as providers of tiers of their own -------------------------------------------
# interpreted_triton: on a CPU the kernels run through Triton's interpreter, checked and never timed.
TIERS = [
    tierbench.plugin_tier("my-triton", "my own Triton kernels", own_code=True, interpreted_triton=True),
    tierbench.plugin_tier("my-torch", "my own PyTorch code", own_code=True),  # timed on a CPU too
]

PROVIDERS = [
    # Of tierbench's own ops (the signatures: docs/plugins.md): their cases, reference and check are tierbench's.
    tierbench.call_provider(
        "my-layernorm", "my-triton", tierbench.builtin_op("layer_norm"), my_kernels.layer_norm, package="triton"
    ),  # fmt: skip
    tierbench.call_provider(
        "my-rmsnorm", "my-triton", tierbench.builtin_op("rms_norm"), my_kernels.rms_norm, package="triton"
    ),  # fmt: skip
    # Of the SwiGLU op above; its backward is the kernel's own (an autograd.Function), checked in `bwd` cases.
    tierbench.call_provider("my-swiglu", "my-triton", SWIGLU, my_kernels.swiglu, package="triton"),
    # The same op in plain PyTorch, a block of rows at a time; `package` names this distribution, so its
    # records carry the plugin's own version.
    tierbench.call_provider(
        "my-swiglu-blocked", "my-torch", SWIGLU, my_kernels.swiglu_blocked, package="tierbench-example-plugin"
    ),
]
