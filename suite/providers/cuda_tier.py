"""The cuda tier: hand-written CUDA and CuTe-DSL kernels from their authors' packages.

Attention comes from the three flash-attn generations, each under its own import name, so a machine may hold
any of them: flash-attn 2 (`flash_attn`, CUDA C++), flash-attn 3 (`flash_attn_interface`, CUDA C++ built from
the repository's hopper/ folder) and flash-attn 4 (`flash_attn.cute`, CuTe DSL, compiled at run time).
RMSNorm and LayerNorm come from quack (`quack-kernels`, CuTe DSL), which flash-attn 4 installs, and so does
the FP8 product with per-tensor scales (quack's Hopper GEMM takes FP8 operands and one scale, `alpha`).

The flash-attn packages take (batch, seq, heads, head_dim): inputs are converted while preparing, outside the
timed call, and the checked output is viewed back as (batch, heads, seq, head_dim). The CuTe-DSL kernels
compile on their first call for each shape family; the runner makes that call inside prepare_s, so compile
time is recorded there and the timed calls, on the same tensors, only hit the packages' compile caches.

Whether a provider can run is decided by pure rules of (compute capability, dtype, head_dim), read from the
packages' own checks (flash_api.cpp, flash_attn/cute/interface.py, quack/rmsnorm.py), so that a case they
reject is recorded as skipped with the reason rather than failing inside the package.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

import torch

from ..ops.attention import RECOMPUTING_BACKWARD_PRODUCTS, executed_flops
from ..ops.base import Case, Op
from .base import Inputs, Prepared, Provider, Unavailable, needs_cuda

CC = tuple[int, int]
# (compute capability, dtype name, head_dim) -> why the package cannot run it, or None.
AttentionRule = Callable[[CC, str, int], str | None]

HALF = ("fp16", "bf16")


# --- Imports and versions ---------------------------------------------------------------------------------


@cache
def _import(module: str) -> ModuleType | Exception:
    """The module, or the exception importing it raised (cached: a failed import would re-run every time)."""
    try:
        return importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - a broken install (missing .so, CUDA mismatch) is a reason, not a crash
        return exc.with_traceback(None)


def import_problem(module: str, install: str) -> str | None:
    """Why `module` cannot be used: not installed or installed but broken, with `install` (how to get it)."""
    loaded = _import(module)
    if isinstance(loaded, ModuleType):
        return None
    detail = f"{type(loaded).__name__}: {loaded}"
    missing = getattr(loaded, "name", None) if isinstance(loaded, ModuleNotFoundError) else None
    if missing and (module == missing or module.startswith(missing + ".")):
        return f"package not installed: {module} ({detail}); {install}"
    return f"package broken: {module} is installed but does not import ({detail}); reinstall: {install}"


def _attribute(module: str, name: str) -> Any:
    loaded = _import(module)
    return getattr(loaded, name, None) if isinstance(loaded, ModuleType) else None


@cache
def _installed_version(distributions: tuple[str, ...], owner_of: str | None) -> str | None:
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    if owner_of:
        # Builds from source have named themselves differently over time (flash-attn 3 was once `flash_attn`):
        # ask which installed distribution provides the module.
        for name in importlib.metadata.packages_distributions().get(owner_of, []):
            try:
                return importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                continue
    return None


def package_version_of(
    distributions: tuple[str, ...], owner_of: str | None = None, module: str | None = None
) -> str | None:
    """The first installed of `distributions`, else the distribution owning the top-level module `owner_of`,
    else the `__version__` of `module` if it is already imported (never imported here: records stay cheap)."""
    found = _installed_version(distributions, owner_of)
    if found is None and module is not None and module in sys.modules:
        version = getattr(sys.modules[module], "__version__", None)
        found = str(version) if version else None
    return found


@dataclass(frozen=True)
class CudaTierProvider(Provider):
    """A Provider whose record version is looked up in several places (base.Provider asks one distribution)."""

    distributions: tuple[str, ...] = ()
    owner_of: str | None = None
    version_module: str | None = None

    def version(self) -> str | None:
        return package_version_of(self.distributions or (self.package,), self.owner_of, self.version_module)


# --- Rules: pure functions of (compute capability, dtype, head_dim) --------------------------------------------


def device_problem(device: torch.device) -> str | None:
    return needs_cuda(device)


def _cc(cc: CC) -> str:
    return f"{cc[0]}.{cc[1]}"


def _too_old(cc: CC, who: str, need: CC) -> str:
    return f"compute capability {_cc(cc)} too old: {who} needs {_cc(need)} or newer"


def _dtype_problem(dtype: str, who: str, allowed: tuple[str, ...] = HALF) -> str | None:
    return None if dtype in allowed else f"dtype {dtype} unsupported: {who} takes {' and '.join(allowed)}"


def flash_attn_2_rule(cc: CC, dtype: str, head_dim: int) -> str | None:
    """csrc/flash_attn/flash_api.cpp: cc major >= 8 (older releases took only 8.x and 9.0, and Blackwell
    needs a build with its kernels, 2.8.2+), fp16/bf16, head_dim <= 256 (padded to a multiple of 8 inside)."""
    if cc < (8, 0):
        return _too_old(cc, "flash-attn-2", (8, 0))
    if reason := _dtype_problem(dtype, "flash-attn-2"):
        return reason
    if not 1 <= head_dim <= 256:
        return f"head_dim {head_dim} unsupported: flash-attn-2 takes head_dim up to 256"
    return None


def flash_attn_3_rule(cc: CC, dtype: str, head_dim: int) -> str | None:
    """hopper/flash_api.cpp: sm90a kernels, plus sm80 ones since 2025 (unless built without); no Blackwell
    kernels; fp16/bf16 (fp8 e4m3 too, not benchmarked); head_dim a multiple of 8 up to 256."""
    if cc < (8, 0):
        return _too_old(cc, "flash-attn-3", (8, 0))
    if cc >= (10, 0):
        return (
            f"compute capability {_cc(cc)} not supported: flash-attn-3 has kernels for 8.x and 9.0 only "
            f"(Hopper build); on Blackwell use flash-attn-4"
        )
    if reason := _dtype_problem(dtype, "flash-attn-3"):
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
        return _too_old(cc, "flash-attn-4", (8, 0))
    if major > 12:
        return f"compute capability {_cc(cc)} not supported: flash-attn-4 has kernels for 8.x to 12.x"
    if reason := _dtype_problem(dtype, "flash-attn-4"):
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
                f"head_dim {head_dim} unsupported: flash-attn-4 on {_cc(cc)} (SM80-MMA kernel, "
                f"{smem // 1024} KB shared memory) takes multiples of 8 up to {largest}"
            )
    return None


def flash_attn_4_backward_rule(cc: CC, head_dim: int) -> str | None:
    """flash_attn/cute/interface.py's _flash_attn_bwd (4.0 betas): the backward dispatch takes 9.x-11.x (the
    SM90 and SM100 kernels); the SM80-MMA path that runs 8.x and 12.x forwards has no backward there."""
    if not 9 <= cc[0] <= 11:
        return (
            f"no backward on compute capability {_cc(cc)}: flash-attn-4's backward runs on 9.x to 11.x "
            f"(its 8.x and 12.x kernels are forward only)"
        )
    return None


def quack_rule(cc: CC, dtype: str) -> str | None:
    """quack's README: H100 or B200/B300 (its 0.6 kernels also have SM8x/SM12x fallbacks, not advertised);
    x in fp16, bf16 or fp32."""
    if cc < (9, 0):
        return _too_old(cc, "quack", (9, 0))
    return _dtype_problem(dtype, "quack", ("fp16", "bf16", "fp32"))


# --- flash-attn --------------------------------------------------------------------------------------------


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


def _on_gpu(device: torch.device) -> CC | str:
    """The device's compute capability, or why there is none."""
    reason = device_problem(device)
    return reason if reason else torch.cuda.get_device_capability(device)


def _flash_why(pkg: FlashAttnPackage) -> Callable[[Case, torch.device], str | None]:
    def why(case: Case, device: torch.device) -> str | None:
        if reason := import_problem(pkg.module, pkg.install):
            return reason
        if not callable(_attribute(pkg.module, pkg.function)):
            return f"package broken: {pkg.module} has no {pkg.function}; reinstall: {pkg.install}"
        cc = _on_gpu(device)
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
        fn = _attribute(pkg.module, pkg.function)
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
        fn = _attribute(pkg.module, pkg.function)

        def attention(q, k, v, causal: bool, scale: float) -> torch.Tensor:
            out = fn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), softmax_scale=scale, causal=causal)
            return (out[0] if isinstance(out, tuple) else out).transpose(1, 2)

        return attention

    return function


def _heads_first(out: torch.Tensor) -> torch.Tensor:
    return out.transpose(1, 2)


# --- quack -------------------------------------------------------------------------------------------------

QUACK_MODULE = "quack.rmsnorm"  # holds both rmsnorm and layernorm_fwd (`quack.rmsnorm` the attribute is the function)
QUACK_INSTALL = "pip install quack-kernels (quack-kernels[cu13] on CUDA 13; flash-attn-4 brings it)"
QUACK_FUNCTIONS = {"rms_norm": "rmsnorm", "layer_norm": "layernorm_fwd"}
# rmsnorm is a torch.autograd.Function (RMSNormFunction, its backward a CuTe-DSL kernel); layernorm_fwd is
# a forward kernel only: quack has no LayerNorm backward.
QUACK_BACKWARD = {"rms_norm": True, "layer_norm": False}


def _quack_function_problem(op: str) -> str | None:
    name = QUACK_FUNCTIONS[op]
    fn = _attribute(QUACK_MODULE, name)
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
        cc = _on_gpu(device)
        if isinstance(cc, str):
            return cc
        return quack_rule(cc, case.params["dtype"])

    return why


def _quack_prepare(op: str) -> Callable[[Inputs, dict[str, Any], Case], Callable[[], Any]]:
    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Callable[[], Any]:
        fn = _attribute(QUACK_MODULE, QUACK_FUNCTIONS[op])
        x, eps = inputs["x"], float(options["eps"])
        if op == "rms_norm":
            weight = inputs["weight"]
            return lambda: fn(x, weight, eps=eps)
        # quack's LayerNorm asserts float32 weight and bias: cast once here (exact from fp16/bf16).
        weight, bias = inputs["weight"].float(), inputs["bias"].float()
        return lambda: fn(x, weight, bias, eps=eps)

    return prepare


# quack's GEMM: A (M, K) and B (K, N), both K-major for FP8 (the layouts matmul_fp8's inputs have), D =
# alpha * A @ B: one scale for the product, so per-tensor scales only.
QUACK_GEMM_MODULE = "quack.gemm_interface"


def _quack_rms_norm_function(case: Case) -> Callable[..., torch.Tensor]:
    fn = _attribute(QUACK_MODULE, QUACK_FUNCTIONS["rms_norm"])
    return lambda x, weight, eps: fn(x, weight, eps=eps)


def _quack_fp8_why(case: Case, device: torch.device) -> str | None:
    if reason := import_problem(QUACK_GEMM_MODULE, QUACK_INSTALL):
        return reason
    fn = _attribute(QUACK_GEMM_MODULE, "gemm")
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
    cc = _on_gpu(device)
    if isinstance(cc, str):
        return cc
    return _too_old(cc, "quack's FP8 GEMM", (9, 0)) if cc < (9, 0) else None


def _quack_fp8_prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Callable[[], Any]:
    fn = _attribute(QUACK_GEMM_MODULE, "gemm")
    a, b = inputs["a"], inputs["b"]
    # The two per-tensor scales as quack's one alpha: a one-element product, made once here.
    alpha = (inputs["scale_a"] * inputs["scale_b"]).reshape(1)
    out_dtype = options["out_dtype"]
    return lambda: fn(a, b, alpha=alpha, out_dtype=out_dtype)


# --- The tier ----------------------------------------------------------------------------------------------


def providers(ops: list[Op]) -> list[Provider]:
    names = {op.name for op in ops}
    out: list[Provider] = [
        CudaTierProvider(
            pkg.provider,
            "cuda",
            "attention",
            _flash_prepare(pkg),
            _flash_why(pkg),
            package=pkg.distributions[0],
            to_op_layout=_heads_first,
            executed_flops=_flash_executed_flops,
            function=_flash_function(pkg),
            distributions=pkg.distributions,
            owner_of=pkg.owner_of,
            version_module=pkg.version_module,
        )
        for pkg in FLASH_ATTN
        if "attention" in names
    ]
    out += [
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
    if "matmul_fp8" in names:
        out.append(
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
        )
    return out
