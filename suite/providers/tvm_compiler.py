"""TVM in the compiler tier: the op's own torch formula, exported (torch.export) and compiled by Apache TVM.

The formula (suite/ops/) is exported at the case's shapes and imported by TVM's Relax frontend
(`from_exported_program`), then `tvm.compile` builds it with the target's default pipeline: on a CPU LLVM's
code generation, on an NVIDIA GPU the CUDA pipeline, whose dlight rules give each kernel its default GPU
schedule (matmul, GEMV, reduction, fallback). Nothing is tuned (no MetaSchedule search), so the time spent
tuning is zero; compilation, seconds per shape, lands in `prepare_s`.

Inputs reach TVM without a copy through DLPack, each as the view contiguous in its storage (TVM's arrays are
compact), the exported module transposing it back to the op's layout; they are handed over once, while
preparing. Backward: the formula's forward and autograd's backward traced together into one aten graph
(make_fx), exported and compiled the same way; it returns the gradients from the inputs and the upstream
gradient, so TVM's backward recomputes the forward (its records' executed work is the forward's plus the
backward's). In that graph LayerNorm's forward is spelled out (mean, centred square, rsqrt): TVM 0.27's
frontend imports `native_layer_norm` as its normalised output three times over, so the mean and 1/std that
the backward reads were the output itself (dx off by 250%); its `native_layer_norm_backward` is right once
they are.

Outputs come back in the formula's dtypes: where TVM's build returns another (its CPU products of bf16
operands come back in float32), the output is converted after TVM's call, and the timing includes that
conversion (a caller needs the op's dtype). An op of several outputs is compiled forward only.

Where the frontend or the compiler refuses a formula (an aten operator or dtype combination it lacks), the
provider is `skipped` with TVM's own message: that is what "where its frontend takes them" means.

Timing: on a GPU each call runs inside tvm_ffi's stream context set to PyTorch's current stream, so TVM's
kernels are enqueued on the timer's own stream and the CUDA events around the call bracket them; TVM's VM
allocates as it runs, so no graph is captured (timer `cuda-events+torch-stream`). On a CPU TVM's calls
return when done.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import torch

from ..ops.base import Case, Op
from .base import Inputs, Prepared, Provider, Unavailable, first_line, missing_module
from .xla import storage_order

STREAM_JOIN = "torch-stream"


def why_unavailable(case: Case, device: torch.device) -> str | None:
    reason = missing_module("tvm", "'tierbench[tvm]' (apache-tvm)")
    if reason:
        return reason
    if device.type == "cuda":
        tvm = importlib.import_module("tvm")
        if tvm.support.libinfo().get("USE_CUDA", "OFF") == "OFF":
            return "this TVM build has no CUDA runtime (USE_CUDA=OFF)"
    return None


def _inverse(order: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(sorted(range(len(order)), key=order.__getitem__))


class _Formula(torch.nn.Module):
    """The op's formula over its inputs in storage order (each permuted back to the op's layout first)."""

    def __init__(self, op: Op, options: dict[str, Any], orders: list[tuple[int, ...]]) -> None:
        super().__init__()
        self.op, self.options, self.inverse = op, options, [_inverse(o) for o in orders]

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        return self.op.formula(*[t.permute(inv) for t, inv in zip(tensors, self.inverse)], **self.options)


def _native_layer_norm(x, shape, weight, bias, eps):
    """aten.native_layer_norm in operators TVM imports faithfully: (y, mean, rstd), the statistics in fp32."""
    dims = tuple(range(x.dim() - len(shape), x.dim()))
    wide = x.float()
    mean = wide.mean(dims, keepdim=True)
    centred = wide - mean
    rstd = torch.rsqrt((centred * centred).mean(dims, keepdim=True) + eps)
    y = centred * rstd
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y.to(x.dtype), mean, rstd


def _joint(formula: _Formula, diff: tuple[int, ...]):
    """(dy, *inputs) -> the gradients of the differentiated inputs: forward and backward as one function."""

    def joint(dy: torch.Tensor, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        leaves = [t.detach().requires_grad_(i in diff) for i, t in enumerate(tensors)]
        out = formula(*leaves)
        return torch.autograd.grad(out, [leaves[i] for i in diff], dy)

    return joint


def _compile(module: torch.nn.Module, example: tuple[torch.Tensor, ...], device: torch.device):
    """A Relax VM function of the exported module, built for the device; Unavailable where TVM refuses it."""
    tvm = importlib.import_module("tvm")
    relax = importlib.import_module("tvm.relax")
    frontend = importlib.import_module("tvm.relax.frontend.torch")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch.export's deprecation notes, once per shape
            mod = frontend.from_exported_program(torch.export.export(module, example))
    except Exception as exc:  # the frontend's refusal, whatever it raises, is why it cannot run
        raise Unavailable(f"TVM's PyTorch frontend does not take this formula: {first_line(exc)}") from exc
    target = tvm.target.Target.from_device(tvm.cuda(device.index or 0)) if device.type == "cuda" else "llvm"
    try:
        executable = tvm.compile(mod, target=target)
    except Exception as exc:
        raise Unavailable(f"TVM does not compile this formula: {first_line(exc)}") from exc
    dev = tvm.cuda(device.index or 0) if device.type == "cuda" else tvm.cpu()
    return relax.VirtualMachine(executable, dev)["main"]


class _TvmCall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, runner: _Runner, *tensors: torch.Tensor) -> torch.Tensor:
        ctx.runner = runner
        return runner.forward()

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        return (None, *ctx.runner.backward(dy))


class _Runner:
    def __init__(self, op: Op, inputs: Inputs, options: dict[str, Any], device: torch.device) -> None:
        self.tensors = op.args(inputs)
        self.device = device
        self.orders = [storage_order(t) for t in self.tensors]
        self.views = [t.detach().permute(o) for t, o in zip(self.tensors, self.orders)]
        tvm = importlib.import_module("tvm")
        self.args = [tvm.runtime.from_dlpack(v) for v in self.views]
        self.formula = _Formula(op, options, self.orders)
        self.diff = tuple(i for i, name in enumerate(op.tensors) if name in op.grads and self.tensors[i].requires_grad)
        if self.diff and len(op.results) > 1:
            raise Unavailable(f"TVM's backward is compiled for ops of one output; {op.name} has {len(op.results)}")
        self.several = len(op.results) > 1
        with torch.no_grad():  # the formula's own output dtypes, which TVM's outputs are returned in
            probe = self.formula(*self.views)
        self.dtypes = [t.dtype for t in (probe if self.several else (probe,))]
        self.fwd = _compile(self.formula, tuple(self.views), device)
        self.bwd = None

    def _run(self, fn, args) -> list[torch.Tensor]:
        if self.device.type == "cuda":
            tvm_ffi = importlib.import_module("tvm_ffi")
            with tvm_ffi.use_torch_stream():
                result = fn(*args)
        else:
            result = fn(*args)
        # An exported program's outputs come back as one TVM array of tensors; a lone tensor is one output.
        tvm = importlib.import_module("tvm")
        items = [result] if isinstance(result, tvm.runtime.Tensor) else list(result)
        return [torch.from_dlpack(r) for r in items]

    def forward(self) -> torch.Tensor | tuple[torch.Tensor, ...]:
        outs = [t if t.dtype == d else t.to(d) for t, d in zip(self._run(self.fwd, self.args), self.dtypes)]
        return tuple(outs) if self.several else outs[0]

    def backward(self, dy: torch.Tensor) -> list[torch.Tensor | None]:
        dy = dy.contiguous()
        if self.bwd is None:  # first backward: compiled while preparing (the harness's first pass)
            from torch.fx.experimental.proxy_tensor import make_fx

            with torch.enable_grad():  # autograd runs a backward with grad mode off; the trace needs it on
                spelled_out = {torch.ops.aten.native_layer_norm.default: _native_layer_norm}
                joint = _joint(self.formula, self.diff)
                graph = make_fx(joint, tracing_mode="fake", decomposition_table=spelled_out)(dy, *self.views)
            self.bwd = _compile(graph, (dy, *self.views), self.device)
        tvm = importlib.import_module("tvm")
        grads = self._run(self.bwd, [tvm.runtime.from_dlpack(dy), *self.args])
        out: list[torch.Tensor | None] = [None] * len(self.tensors)
        for i, g in zip(self.diff, grads):
            out[i] = g.permute(_inverse(self.orders[i]))
        return out

    def __call__(self) -> torch.Tensor | tuple[torch.Tensor, ...]:
        if self.diff and torch.is_grad_enabled():
            return _TvmCall.apply(self, *self.tensors)
        return self.forward()


def _prepare(op: Op):
    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Prepared:
        return Prepared(_Runner(op, inputs, options, inputs[op.tensors[0]].device))

    return prepare


def providers(ops: list[Op]) -> list[Provider]:
    return [
        Provider(
            "tvm", "compiler", op.name, _prepare(op), why_unavailable, package="apache-tvm", stream_join=STREAM_JOIN
        )
        for op in ops
        if op.formula
    ]
