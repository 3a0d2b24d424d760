"""The passes a case measures: the forward, the backward alone, or both, the same way for every provider.

A provider hands over its forward call; the backward modes differentiate it with autograd against the
inputs (or the provider's own converted copies), with one fixed random upstream gradient per case:
- fwd: the timed call is the forward;
- bwd: the forward runs outside the timed region (on the timer's stream, so a CUDA graph captures the
  backward's kernels), and the timed call is `torch.autograd.grad` alone: the gradients it returns are what
  the provider's own backward allocates, nothing is accumulated into `.grad`;
- fwd_bwd: the forward and the backward together.
The reference side gives the same names: "out" and one "d<input>" per input that gets a gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tierbench.timing import Staged

from .checking import kind_of
from .ops.base import OUT, Case, Op, grad_name, hi_precision, randn
from .providers.base import Prepared, Provider, Unavailable

Outputs = dict[str, torch.Tensor]


class WrongOutput(Exception):
    """A provider's forward gave something that is no output at all (None, a tuple): it is incorrect."""


def needs_grads(case: Case) -> bool:
    return case.mode != "fwd"


def leaf_inputs(op: Op, case: Case, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inputs as the providers get them: for the backward modes, the differentiated ones require grad."""
    if not needs_grads(case):
        return inputs
    if not op.grads:
        raise Unavailable(f"{op.name} has no backward pass")
    return {name: t.detach().requires_grad_(name in op.grads) for name, t in inputs.items()}


def upstream_gradient(ref_out: torch.Tensor, case: Case, device: torch.device, gen: torch.Generator) -> torch.Tensor:
    """The fixed random gradient of the output that every provider's backward receives (the output's dtype)."""
    return randn(tuple(ref_out.shape), case.out_dtype, device, gen)


def reference_outputs(
    op: Op,
    case: Case,
    inputs: dict[str, torch.Tensor],
    options: dict[str, Any],
    device: torch.device,
    gen: torch.Generator,
) -> tuple[Outputs, torch.Tensor | None]:
    """The reference's outputs of this case's mode, and the upstream gradient (None for the forward)."""
    if not needs_grads(case):
        with torch.no_grad():
            return {OUT: op.reference(*op.args(inputs), **options)}, None
    hi = hi_precision(device)
    leaves = {name: t.detach().to(hi).requires_grad_(name in op.grads) for name, t in inputs.items()}
    out = op.reference(*op.args(leaves), **options)
    dy = upstream_gradient(out, case, device, gen)
    grads = torch.autograd.grad(out, [leaves[n] for n in op.grads], dy.to(hi))
    refs = {grad_name(n): g.detach() for n, g in zip(op.grads, grads)}
    if case.mode == "fwd_bwd":
        refs = {OUT: out.detach(), **refs}
    return refs, dy


class Pass:
    """One provider's pass of one case: `setup()` (the forward, for bwd), `run()` the pass itself returning
    its outputs in the op's layout, and `timed()` what the timer times."""

    def __init__(
        self, op: Op, case: Case, provider: Provider, prepared: Callable[[], Any] | Prepared, inputs, dy
    ) -> None:
        if not isinstance(prepared, Prepared):
            prepared = Prepared(prepared)
        self.op, self.case, self.provider = op, case, provider
        self.call = prepared.call
        self.dy = dy
        source = prepared.leaves or inputs
        self.leaves = [source[name] for name in op.grads] if needs_grads(case) else []
        self._out: torch.Tensor | None = None
        self._dy: torch.Tensor | None = None

    def _in_provider_layout(self, out: torch.Tensor) -> torch.Tensor:
        """The upstream gradient laid out as the provider's output is (written through its op-layout view)."""
        if self._dy is None or self._dy.shape != out.shape:
            dy = torch.empty_like(out, requires_grad=False)
            self.provider.to_op_layout(dy).copy_(self.dy)
            self._dy = dy
        return self._dy

    def _forward(self) -> torch.Tensor:
        out = self.call()
        if not isinstance(out, torch.Tensor):
            raise WrongOutput(f"the provider returned {kind_of(out)}, not a tensor")
        if not out.requires_grad:
            raise Unavailable(f"{self.provider.name} has no backward for {self.op.name}: its output takes no gradient")
        return out

    def _grads(self, out: torch.Tensor, retain: bool) -> tuple[torch.Tensor, ...]:
        return torch.autograd.grad(out, self.leaves, self._in_provider_layout(out), retain_graph=retain)

    def setup(self) -> None:
        if self.case.mode == "bwd":
            self._out = self._forward()

    def prime(self) -> None:
        """Lay the upstream gradient out before a first run that is itself the measured one (a pass on
        Triton's interpreter, profiled and checked in its one run), so that copy is not counted in it."""
        if self.case.mode == "bwd":
            self._in_provider_layout(self._out)
        elif self.case.mode == "fwd_bwd":
            self._in_provider_layout(self._forward().detach())

    def run(self) -> dict[str, Any]:
        mode = self.case.mode
        if mode == "fwd":
            return {OUT: self._op_layout(self.call())}
        out = self._out if mode == "bwd" else self._forward()
        grads = self._grads(out, retain=mode == "bwd")
        named = {grad_name(n): self._op_layout(g) for n, g in zip(self.op.grads, grads)}
        return named if mode == "bwd" else {OUT: self._op_layout(out.detach()), **named}

    def named(self, timed_result: Any) -> dict[str, Any]:
        """What the timed call returned, named as `run()` names its outputs: the forward's output for fwd,
        the gradients for bwd and fwd_bwd (whose timed call returns those alone)."""
        if self.case.mode == "fwd":
            return {OUT: self._op_layout(timed_result)}
        grads = timed_result if isinstance(timed_result, (tuple, list)) else (timed_result,)
        return {grad_name(n): self._op_layout(g) for n, g in zip(self.op.grads, grads)}

    def _op_layout(self, t: Any) -> Any:
        return self.provider.to_op_layout(t) if isinstance(t, torch.Tensor) else t

    def release(self) -> None:
        """Drop the forward kept for the check (its saved tensors), before the timer builds its own."""
        self._out = None

    def timed(self) -> Callable[[], Any] | Staged:
        mode = self.case.mode
        if mode == "fwd":
            return self.call
        if mode == "bwd":

            def build() -> Callable[[], Any]:
                out = self._forward()
                dy = self._in_provider_layout(out)
                return lambda: torch.autograd.grad(out, self.leaves, dy, retain_graph=True)

            return Staged(build)

        def build_both() -> Callable[[], Any]:
            dy = self._in_provider_layout(self._forward())
            return lambda: torch.autograd.grad(self.call(), self.leaves, dy)

        return Staged(build_both)
