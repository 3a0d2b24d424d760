"""The cuda tier's attention: the three flash-attn generations, each under its own import name, so a machine may
hold any of them: flash-attn 2 (`flash_attn`, CUDA C++), flash-attn 3 (`flash_attn_interface`, CUDA C++ built
from the repository's hopper/ folder) and flash-attn 4 (`flash_attn.cute`, CuTe DSL, compiled at run time).

The packages take (batch, seq, heads, head_dim): inputs are converted while preparing, outside the timed call,
and the checked output is viewed back as (batch, heads, seq, head_dim). Which cases each runs is read from its
own checks (flash_api.cpp, flash_attn/cute/interface.py). Decode's KV-cache entry points are declared by its
family (suite/ops/decode.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..ops.attention import RECOMPUTING_BACKWARD_PRODUCTS, executed_flops
from ..ops.base import Case, Op
from .base import Inputs, Prepared, Provider, Unavailable
from .cuda_packages import CC, CudaTierProvider, attribute, cc_text, dtype_problem, import_problem, on_gpu, too_old

# (compute capability, dtype name, head_dim) -> why the package cannot run it, or None.
AttentionRule = Callable[[CC, str, int], str | None]


def flash_attn_2_rule(cc: CC, dtype: str, head_dim: int) -> str | None:
    """csrc/flash_attn/flash_api.cpp: cc major >= 8 (older releases took only 8.x and 9.0, and Blackwell
    needs a build with its kernels, 2.8.2+), fp16/bf16, head_dim <= 256 (padded to a multiple of 8 inside)."""
    if cc < (8, 0):
        return too_old(cc, "flash-attn-2", (8, 0))
    if reason := dtype_problem(dtype, "flash-attn-2"):
        return reason
    if not 1 <= head_dim <= 256:
        return f"head_dim {head_dim} unsupported: flash-attn-2 takes head_dim up to 256"
    return None


def flash_attn_3_rule(cc: CC, dtype: str, head_dim: int) -> str | None:
    """hopper/flash_api.cpp: sm90a kernels, plus sm80 ones since 2025 (unless built without); no Blackwell
    kernels; fp16/bf16 (fp8 e4m3 too, not benchmarked); head_dim a multiple of 8 up to 256."""
    if cc < (8, 0):
        return too_old(cc, "flash-attn-3", (8, 0))
    if cc >= (10, 0):
        return (
            f"compute capability {cc_text(cc)} not supported: flash-attn-3 has kernels for 8.x and 9.0 only "
            f"(Hopper build); on Blackwell use flash-attn-4"
        )
    if reason := dtype_problem(dtype, "flash-attn-3"):
        return reason
    if head_dim % 8 or not 8 <= head_dim <= 256:
        return f"head_dim {head_dim} unsupported: flash-attn-3 takes multiples of 8 up to 256"
    return None


# Shared memory per block on the parts flash-attn 4 runs with its SM80-MMA kernel (8.x, 12.x): 163 KB on
# sm80/sm87, 99 KB on sm86/sm89/sm120/sm121. That kernel keeps a 128-row Q tile and 64-row K and V tiles,
# one stage: 512 * head_dim bytes in 16-bit types.
_FA4_SM80_PATH_SMEM = {(8, 0): 163 * 1024, (8, 7): 163 * 1024}
_SMALL_SMEM = 99 * 1024


def flash_attn_4_rule(cc: CC, dtype: str, head_dim: int) -> str | None:
    """flash_attn/cute/interface.py (4.0.0b36): archs 8.x-12.x; fp16/bf16; head_dim a multiple of 8 and
    8..256 on 9.x, 8..128 or 256 on 10.x/11.x; 8.x and 12.x go through the SM80-MMA kernel (shared memory)."""
    major = cc[0]
    if major < 8:
        return too_old(cc, "flash-attn-4", (8, 0))
    if major > 12:
        return f"compute capability {cc_text(cc)} not supported: flash-attn-4 has kernels for 8.x to 12.x"
    if reason := dtype_problem(dtype, "flash-attn-4"):
        return reason
    if head_dim % 8 or head_dim < 8:
        return f"head_dim {head_dim} unsupported: flash-attn-4 takes multiples of 8"
    if major == 9 and head_dim > 256:
        return f"head_dim {head_dim} unsupported: flash-attn-4 on 9.x takes multiples of 8 up to 256"
    if major in (10, 11) and head_dim > 128 and head_dim != 256:
        return f"head_dim {head_dim} unsupported: flash-attn-4 on {major}.x takes multiples of 8 up to 128, or 256"
    if major in (8, 12):
        smem = _FA4_SM80_PATH_SMEM.get(cc, _SMALL_SMEM)
        largest = min(256, smem // 512 // 8 * 8)
        if head_dim > largest:
            return (
                f"head_dim {head_dim} unsupported: flash-attn-4 on {cc_text(cc)} (SM80-MMA kernel, "
                f"{smem // 1024} KB shared memory) takes multiples of 8 up to {largest}"
            )
    return None


def flash_attn_4_backward_rule(cc: CC, head_dim: int) -> str | None:
    """flash_attn/cute/interface.py's _flash_attn_bwd (4.0 betas): the backward dispatch takes 9.x-11.x (the
    SM90 and SM100 kernels); the SM80-MMA path that runs 8.x and 12.x forwards has no backward there."""
    if not 9 <= cc[0] <= 11:
        return (
            f"no backward on compute capability {cc_text(cc)}: flash-attn-4's backward runs on 9.x to 11.x "
            f"(its 8.x and 12.x kernels are forward only)"
        )
    return None


@dataclass(frozen=True)
class FlashAttnPackage:
    provider: str
    module: str  # imported to call `function`; a submodule, so a missing compiled extension shows up here
    function: str
    distributions: tuple[str, ...]  # where the record's version is looked up, in order
    owner_of: str | None  # top-level module whose owning distribution gives the version if none of those does
    version_module: str | None
    install: str  # how to install it, quoted in the reason
    rule: AttentionRule
    # (compute capability, head_dim) -> why its backward cannot run there; None: wherever its forward runs.
    backward_rule: Callable[[CC, int], str | None] | None = None


FLASH_ATTN = (
    FlashAttnPackage(
        "flash-attn-2",
        "flash_attn.flash_attn_interface",
        "flash_attn_func",
        ("flash-attn",),
        None,
        "flash_attn",
        "pip install flash-attn --no-build-isolation (compiles CUDA sources: needs nvcc)",
        flash_attn_2_rule,
    ),
    FlashAttnPackage(
        "flash-attn-3",
        "flash_attn_interface",
        "flash_attn_func",
        ("flash-attn-3",),
        "flash_attn_interface",
        "flash_attn_3",
        "flash-attn-3 (distribution flash_attn_3) is not on PyPI: build it from the "
        "flash-attention repository, cd hopper && python setup.py install (needs nvcc 12.3+)",
        flash_attn_3_rule,
    ),
    FlashAttnPackage(
        "flash-attn-4",
        "flash_attn.cute",
        "flash_attn_func",
        ("flash-attn-4",),
        None,
        None,
        "pip install flash-attn-4 (flash-attn-4[cu13] on CUDA 13)",
        flash_attn_4_rule,
        flash_attn_4_backward_rule,
    ),
)


def _flash_why(pkg: FlashAttnPackage) -> Callable[[Case, torch.device], str | None]:
    def why(case: Case, device: torch.device) -> str | None:
        if reason := import_problem(pkg.module, pkg.install):
            return reason
        if not callable(attribute(pkg.module, pkg.function)):
            return f"package broken: {pkg.module} has no {pkg.function}; reinstall: {pkg.install}"
        cc = on_gpu(device)
        if isinstance(cc, str):
            return cc
        head_dim = int(case.params["head_dim"])
        if reason := pkg.rule(cc, case.params["dtype"], head_dim):
            return reason
        if case.mode != "fwd" and pkg.backward_rule is not None:
            return pkg.backward_rule(cc, head_dim)
        return None

    return why


def _flash_executed_flops(case: Case) -> float:
    # All three generations save only the row log-sum-exp and recompute q k^T in the backward (five
    # products, dQ accumulated across key blocks), skipping the tiles above a causal diagonal in both passes.
    return executed_flops(case, RECOMPUTING_BACKWARD_PRODUCTS, skips_masked=True)


def _flash_prepare(pkg: FlashAttnPackage) -> Callable[[Inputs, dict[str, Any], Case], Prepared]:
    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Prepared:
        fn = attribute(pkg.module, pkg.function)
        if fn is None:
            raise Unavailable(f"{pkg.module} has no {pkg.function}")
        # One copy each into (batch, seq, heads, head_dim), here: the timed call sees contiguous inputs, and
        # the backward modes take gradients against these copies (no layout change in a timed backward).
        leaves = {
            name: inputs[name].detach().transpose(1, 2).contiguous().requires_grad_(inputs[name].requires_grad)
            for name in ("q", "k", "v")
        }
        q, k, v = leaves["q"], leaves["k"], leaves["v"]
        scale, causal = float(options["scale"]), bool(options["causal"])

        def call() -> torch.Tensor:
            out = fn(q, k, v, softmax_scale=scale, causal=causal)
            # flash-attn 4 returns (out, lse), early flash-attn 3 betas did too; 2 and later 3 return out.
            return out[0] if isinstance(out, tuple) else out

        return Prepared(call, leaves)

    return prepare


def _flash_function(pkg: FlashAttnPackage) -> Callable[[Case], Callable[..., torch.Tensor]]:
    """The package as a function of attention's signature (for a composed chain): q, k, v seen sequence-first
    (no copy where their memory already is, as a QKV projection leaves it), the output seen heads-first."""

    def function(case: Case) -> Callable[..., torch.Tensor]:
        fn = attribute(pkg.module, pkg.function)

        def attention(q, k, v, causal: bool, scale: float) -> torch.Tensor:
            out = fn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), softmax_scale=scale, causal=causal)
            return (out[0] if isinstance(out, tuple) else out).transpose(1, 2)

        return attention

    return function


def heads_first(out: torch.Tensor) -> torch.Tensor:
    return out.transpose(1, 2)


def providers(ops: list[Op]) -> list[Provider]:
    names = {op.name for op in ops}
    return [
        CudaTierProvider(
            pkg.provider,
            "cuda",
            "attention",
            _flash_prepare(pkg),
            _flash_why(pkg),
            package=pkg.distributions[0],
            to_op_layout=heads_first,
            executed_flops=_flash_executed_flops,
            function=_flash_function(pkg),
            distributions=pkg.distributions,
            owner_of=pkg.owner_of,
            version_module=pkg.version_module,
        )
        for pkg in FLASH_ATTN
        if "attention" in names
    ]
