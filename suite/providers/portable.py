"""The portable tier: one kernel codebase across vendors (suite/tiers.py's PORTABLE says what that means here).

- `mojo`: tierbench's own Mojo kernels (kernels/mojo/: the matmul, RMSNorm and LayerNorm), compiled by MAX
  and called through its PyTorch custom-op route (`max.experimental.torch.CustomOpLibrary`). The same source
  is built for a CPU or a GPU: `foreach` maps each kernel's per-element function over its output. MAX
  compiles the package once per process and a graph per shape and dtype at the first call (`prepare_s`).
  Forward only: a custom op has no autograd formula, so its backward passes are `skipped` with that reason.
- `iree`: the op's torch formula compiled by IREE, an MLIR stack, as a torch.compile backend (iree-turbine's
  `iree_turbine`, through AOTAutograd, so the backward is IREE's too): its CPU target on a CPU, its CUDA
  target on an NVIDIA GPU. It compiles while preparing (one call, and a backward where the case takes
  gradients, on copies of the inputs), so where IREE refuses a formula the provider is `skipped` with
  IREE's own message, as TVM's is: iree-turbine 3.x cannot trace the backward of a masked score
  (masked_fill, where: a real scalar among its fake tensors; an additive mask: a `none` result it cannot
  lower), nor compile SwiGLU's backward or a whole block.

Timing: MAX imports each tensor with PyTorch's current stream and IREE's turbine ties its device to that
stream, so on a GPU their work is ordered on the timer's stream; both run their own runtimes, which a CUDA
graph capture cannot be relied on to see, so they are timed by plain launches (timer
`cuda-events+torch-stream`). Not yet measured on a GPU.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.resources
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..ops.base import Case, Op
from .base import Inputs, Provider, Unavailable, first_line, missing_module, needs_compute_capability

STREAM_JOIN = "torch-stream"

# -- mojo ---------------------------------------------------------------------------------------------

# Op -> the Mojo kernel's registered name and how many float32 statistics per row it writes.
MOJO_KERNELS = {"matmul": ("tierbench_matmul", 0), "rms_norm": ("tierbench_rms_norm", 1),
                "layer_norm": ("tierbench_layer_norm", 2)}  # fmt: skip
MOJO_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def mojo_source() -> Path:
    """The Mojo package of tierbench's kernels (a folder with __init__.mojo), as installed."""
    return Path(str(importlib.resources.files("tierbench.kernels") / "mojo"))


@functools.cache
def _library() -> Any:
    """MAX's custom-op library of tierbench's Mojo kernels: the package compiled once per process."""
    torch_route = importlib.import_module("max.experimental.torch")
    return torch_route.CustomOpLibrary(mojo_source())


def _mojo_why(op: Op) -> Callable[[Case, torch.device], str | None]:
    def why(case: Case, device: torch.device) -> str | None:
        reason = missing_module("max.experimental.torch", "'tierbench[mojo]' (max)")
        if reason:
            return reason
        if case.dtype not in MOJO_DTYPES:
            return f"dtype {case.params['dtype']} unsupported: tierbench's Mojo kernels take fp32, fp16 and bf16"
        if case.mode != "fwd":
            return f"no backward: tierbench's Mojo {op.name} kernel is a MAX custom op, which has no autograd formula"
        if device.type == "cuda":
            # MAX's GPU requirement for NVIDIA cards (its documentation: Ampere and newer).
            return needs_compute_capability(device, 8, 0)
        return None

    return why


def _mojo_prepare(op: Op):
    kernel, n_stats = MOJO_KERNELS[op.name]

    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Callable[[], torch.Tensor]:
        call = getattr(_library(), kernel)
        args = [t.contiguous() if not t.is_contiguous() else t for t in op.args(inputs)]
        if op.name == "matmul":
            a, b = args

            def matmul() -> torch.Tensor:
                c = a.new_empty((a.shape[0], b.shape[1]))
                call(c, a, b)
                return c

            return matmul
        # A custom op's arguments are tensors: eps goes over as one float32 element.
        eps = torch.tensor([options["eps"]], dtype=torch.float32, device=args[0].device)
        x = args[0]

        def norm() -> torch.Tensor:
            out = torch.empty_like(x)
            stats = torch.empty((x.shape[0], n_stats), dtype=torch.float32, device=x.device)
            call(out, stats, *args, eps)
            return out

        return norm

    return prepare


# -- iree ---------------------------------------------------------------------------------------------

_IREE_COMPILED: dict[str, Callable[..., torch.Tensor]] = {}


def _iree_why(case: Case, device: torch.device) -> str | None:
    reason = missing_module("iree.turbine", "'tierbench[iree]' (iree-turbine, iree-base-compiler, iree-base-runtime)")
    if reason:
        return reason
    if device.type == "cuda":
        runtime = importlib.import_module("iree.runtime")
        if "cuda" not in runtime.query_available_drivers():
            return "this IREE runtime has no CUDA driver"
    return None


def _iree_compiled(op: Op) -> Callable[..., torch.Tensor]:
    if op.name not in _IREE_COMPILED:
        importlib.import_module("iree.turbine.dynamo.backends.base")  # registers the `iree_turbine` backend
        formula = op.formula

        # A function of its own: Dynamo keys its compiled code by the traced function, which for the
        # compile provider is the formula itself.
        def through_iree(*args: torch.Tensor, **options: Any) -> torch.Tensor:
            return formula(*args, **options)

        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 1024)
        _IREE_COMPILED[op.name] = torch.compile(through_iree, backend="iree_turbine", fullgraph=True, dynamic=False)
    return _IREE_COMPILED[op.name]


def _iree_prepare(op: Op):
    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Callable[[], torch.Tensor]:
        fn = _iree_compiled(op)
        args = op.args(inputs)
        _compile_now(op, fn, args, options)
        return lambda: fn(*args, **options)

    return prepare


def _compile_now(op: Op, fn: Callable[..., Any], args: list[torch.Tensor], options: dict[str, Any]) -> None:
    """One call, and one backward where an input takes a gradient, on copies of the inputs: IREE compiles
    both here (the backward is otherwise compiled inside autograd's first backward), and a formula it cannot
    compile is Unavailable with IREE's message. Running out of memory is no refusal: raised as it is."""
    copies = [t.detach().clone().requires_grad_(t.requires_grad) for t in args]
    leaves = [t for t in copies if t.requires_grad]
    what = "this formula"
    try:
        with torch.enable_grad() if leaves else contextlib.nullcontext():
            out = fn(*copies, **options)
            outs = [o for o in op.named_results(out).values() if o.requires_grad]
            if leaves and outs:
                what = "this formula's backward"
                # retain_graph: a backward compiled without it donates its buffers, and then refuses the
                # bwd pass's repeated backward over one graph.
                torch.autograd.grad(
                    outs, leaves, [torch.ones_like(o) for o in outs], retain_graph=True, allow_unused=True
                )
    except (torch.OutOfMemoryError, MemoryError):
        raise
    except Exception as exc:  # IREE's refusal, whatever it raises, is why it cannot run
        raise Unavailable(f"IREE does not compile {what}: {first_line(exc)}") from exc


def providers(ops: list[Op]) -> list[Provider]:
    out = [
        Provider(
            "mojo",
            "portable",
            op.name,
            _mojo_prepare(op),
            _mojo_why(op),
            package="max",
            stream_join=STREAM_JOIN,
            own_code=True,
        )
        for op in ops
        if op.name in MOJO_KERNELS
    ]
    out += [
        Provider(
            "iree", "portable", op.name, _iree_prepare(op), _iree_why, package="iree-turbine", stream_join=STREAM_JOIN
        )
        for op in ops
        if op.formula
    ]
    return out
