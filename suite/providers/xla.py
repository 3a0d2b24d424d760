"""XLA in the compiler tier: each op's formula written in jax.numpy (_jax_formulas.py), jitted by JAX.

Inputs reach JAX and outputs come back through DLPack without a copy: each tensor is handed over as the
view that is contiguous in its storage (a decode cache kept sequence-first goes over as it sits in memory)
and the formula transposes it back to the op's layout, which XLA folds into its kernels. Compilation (one
executable per shape, dtype and options) happens in `prepare`, so it lands in `prepare_s`.

Backward: the forward, where a gradient is wanted, runs `jax.vjp` jitted, which returns the output and the
residuals XLA chose to keep; the backward applies them to the upstream gradient, jitted too. Both are
wrapped in one torch.autograd.Function, so the harness's passes (fwd, bwd, fwd_bwd) treat XLA like any
provider.

Timing: JAX runs its work on a CUDA stream of its own. DLPack's stream handshake orders it on the timer's
stream: handing a tensor to JAX (at every call, on a GPU) makes JAX's stream wait for the timer's, and taking
an output back makes the timer's stream wait for JAX's, so the CUDA events around a call bracket exactly its
device work (plus the host's dispatch where the GPU waits on it, as for any call timed without a graph). A
capture on the timer's stream would not see JAX's launches, so XLA is never graph-replayed; its records' timer
says
`cuda-events+dlpack-stream-sync`. On a CPU JAX dispatches asynchronously: each output is waited for before
it is handed back, so the host clock sees the whole call.
"""

from __future__ import annotations

import functools
import importlib
import os
from typing import Any

import torch

from ..ops.base import Case, Op
from .base import Inputs, Prepared, Provider, missing_module

# The ops _jax_formulas.py expresses (known without importing jax). The FP8 product is not among them:
# DLPack has no FP8 element type in the versions read, so its operands could not reach JAX without a copy.
OPS = frozenset(
    {"matmul", "matmul_bias_gelu", "layer_norm", "rms_norm", "bias_gelu_layer_norm"}
    | {"attention", "decode", "decode_paged"}
)
STREAM_JOIN = "dlpack-stream-sync"


def _configure() -> None:
    """Before jax is imported (it reads these then): JAX would otherwise take 75% of the GPU's memory at its
    first use, leaving PyTorch's allocator short, and probe for TPUs (a warning on every CPU run)."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    os.environ.setdefault("JAX_PLATFORMS", "cuda,cpu" if torch.cuda.is_available() else "cpu")


def _jax() -> Any:
    _configure()
    return importlib.import_module("jax")


def why_unavailable(case: Case, device: torch.device) -> str | None:
    _configure()
    reason = missing_module("jax", "'tierbench[xla]' (jax; on CUDA 13 jax[cuda13])")
    if reason:
        return reason
    jax = _jax()
    platform = "gpu" if device.type == "cuda" else "cpu"
    try:
        jax.devices(platform)
    except RuntimeError as exc:
        return f"jax has no {platform} backend here ({exc}); on CUDA 13 pip install 'jax[cuda13]'"
    return None


def storage_order(t: torch.Tensor) -> tuple[int, ...]:
    """The permutation of t's dims that makes it contiguous in its storage (outermost stride first)."""
    return tuple(sorted(range(t.ndim), key=lambda d: (-t.stride(d), d)))


def _to_jax(t: torch.Tensor, order: tuple[int, ...]) -> Any:
    """t as a JAX array in storage order, without a copy where its strides allow one."""
    return _jax().dlpack.from_dlpack(t.detach().permute(order))


def _from_jax(x: Any, device: torch.device) -> torch.Tensor:
    if device.type != "cuda":
        x.block_until_ready()  # asynchronous dispatch: the host clock must see the whole call
    return torch.from_dlpack(x)


@functools.cache
def _compiled(op_name: str, orders: tuple[tuple[int, ...], ...], diff: tuple[int, ...], options: tuple) -> tuple:
    """(forward, forward with residuals, backward), jitted; one set per op, input layout and options."""
    jax = _jax()
    formula = importlib.import_module(f"{__package__}._jax_formulas").FORMULAS[op_name]
    kwargs = dict(options)
    inverse = [tuple(sorted(range(len(order)), key=order.__getitem__)) for order in orders]

    def in_op_layout(args):
        return [a.transpose(inv) if inv != tuple(range(len(inv))) else a for a, inv in zip(args, inverse)]

    def forward(*args):
        return formula(*in_op_layout(args), **kwargs)

    def forward_with_residuals(*args):
        def of_differentiated(*d):
            full = list(args)
            for i, value in zip(diff, d):
                full[i] = value
            return forward(*full)

        return jax.vjp(of_differentiated, *[args[i] for i in diff])

    return jax.jit(forward), jax.jit(forward_with_residuals), jax.jit(lambda vjp, dy: vjp(dy))


class _XlaCall(torch.autograd.Function):
    """One jitted call as an autograd node: its backward is XLA's, applied to the kept residuals."""

    @staticmethod
    def forward(ctx, runner: _Runner, *tensors: torch.Tensor) -> torch.Tensor:
        out, ctx.vjp = runner.forward_with_residuals()
        ctx.runner = runner
        return out

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        grads = ctx.runner.backward(ctx.vjp, dy)
        return (None, *grads)


class _Runner:
    """The jitted calls of one prepared case, with its inputs already handed to JAX."""

    def __init__(self, op: Op, inputs: Inputs, options: dict[str, Any], device: torch.device) -> None:
        self.tensors = op.args(inputs)
        self.device = device
        orders = tuple(storage_order(t) for t in self.tensors)
        self.diff = tuple(i for i, name in enumerate(op.tensors) if name in op.grads and self.tensors[i].requires_grad)
        self.orders = orders
        self._cpu_args = [_to_jax(t, o) for t, o in zip(self.tensors, orders)] if device.type != "cuda" else None
        self.fwd, self.fwd_res, self.bwd = _compiled(op.name, orders, self.diff, tuple(sorted(options.items())))

    def args(self) -> list[Any]:
        """The inputs as JAX arrays. On a GPU they are handed over at every call: DLPack's handshake then makes
        JAX's stream wait for the timer's (the cache flush, the start event), which a handover made once, while
        preparing, would not; on a CPU there is no stream to order, so once is enough."""
        if self._cpu_args is not None:
            return self._cpu_args
        return [_to_jax(t, o) for t, o in zip(self.tensors, self.orders)]

    def forward(self) -> torch.Tensor:
        return _from_jax(self.fwd(*self.args()), self.device)

    def forward_with_residuals(self) -> tuple[torch.Tensor, Any]:
        out, vjp = self.fwd_res(*self.args())
        return _from_jax(out, self.device), vjp

    def backward(self, vjp: Any, dy: torch.Tensor) -> list[torch.Tensor | None]:
        grads = self.bwd(vjp, _to_jax(dy.contiguous(), tuple(range(dy.ndim))))
        out: list[torch.Tensor | None] = [None] * len(self.tensors)
        for i, g in zip(self.diff, grads):
            out[i] = _from_jax(g, self.device)
        return out

    def __call__(self) -> torch.Tensor:
        if self.diff and torch.is_grad_enabled():
            return _XlaCall.apply(self, *self.tensors)
        return self.forward()


def _prepare(op: Op):
    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Prepared:
        # jax.jit compiles at the first call, which the harness makes while preparing (prepare_s).
        return Prepared(_Runner(op, inputs, options, inputs[op.tensors[0]].device))

    return prepare


def providers(ops: list[Op]) -> list[Provider]:
    return [
        Provider(
            "xla",
            "compiler",
            op.name,
            _prepare(op),
            why_unavailable,
            package="jax",
            stream_join=STREAM_JOIN,
        )
        for op in ops
        if op.name in OPS
    ]
