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

from ..ops.base import Case, Op, grad_name, hi_precision, randn
from ..providers.base import Prepared, Provider, Unavailable
from .checking import kind_of

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


Upstream = torch.Tensor | tuple[torch.Tensor, ...]


def reference_outputs(
    op: Op,
    case: Case,
    inputs: dict[str, torch.Tensor],
    options: dict[str, Any],
    device: torch.device,
    gen: torch.Generator,
) -> tuple[Outputs, Upstream | None]:
    """The reference's outputs of this case's mode, and the upstream gradient (None for the forward; one per
    output, as a tuple, for an op of several outputs)."""
    if not needs_grads(case):
        with torch.no_grad():
            return op.named_results(op.reference(*op.args(inputs), **options)), None
    hi = hi_precision(device)
    leaves = {name: t.detach().to(hi).requires_grad_(name in op.grads) for name, t in inputs.items()}
    outs = op.named_results(op.reference(*op.args(leaves), **options))
    dys = tuple(upstream_gradient(out, case, device, gen) for out in outs.values())
    grads = torch.autograd.grad(list(outs.values()), [leaves[n] for n in op.grads], [d.to(hi) for d in dys])
    refs = {grad_name(n): g.detach() for n, g in zip(op.grads, grads)}
    if case.mode == "fwd_bwd":
        refs = {**{name: out.detach() for name, out in outs.items()}, **refs}
    return refs, dys[0] if len(dys) == 1 else dys


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
        self.dys: tuple[torch.Tensor, ...] = () if dy is None else (dy if isinstance(dy, tuple) else (dy,))
        source = prepared.leaves or inputs
        self.leaves = [source[name] for name in op.grads] if needs_grads(case) else []
        self._out: tuple[torch.Tensor, ...] | None = None
        self._dy: tuple[torch.Tensor, ...] | None = None

    def _in_provider_layout(self, outs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        """The upstream gradients laid out as the provider's outputs are (written through its op-layout view)."""
        if self._dy is None or [d.shape for d in self._dy] != [o.shape for o in outs]:
            laid = []
            for out, given in zip(outs, self.dys):
                dy = torch.empty_like(out, requires_grad=False)
                self.provider.to_op_layout(dy).copy_(given)
                laid.append(dy)
            self._dy = tuple(laid)
        return self._dy

    def _forward(self) -> tuple[torch.Tensor, ...]:
        result = self.call()
        try:
            outs = tuple(self.op.named_results(result).values())
        except TypeError as exc:  # several outputs expected, something else returned
            raise WrongOutput(str(exc)) from None
        if not all(isinstance(out, torch.Tensor) for out in outs):
            raise WrongOutput(f"the provider returned {kind_of(result)}, not a tensor")
        if not all(out.requires_grad for out in outs):
            raise Unavailable(f"{self.provider.name} has no backward for {self.op.name}: its output takes no gradient")
        return outs

    def _grads(self, outs: tuple[torch.Tensor, ...], retain: bool) -> tuple[torch.Tensor, ...]:
        return torch.autograd.grad(outs, self.leaves, self._in_provider_layout(outs), retain_graph=retain)

    def setup(self) -> None:
        if self.case.mode == "bwd":
            self._out = self._forward()

    def prime(self) -> None:
        """Lay the upstream gradient out before a first run that is itself the measured one (a pass on
        Triton's interpreter, profiled and checked in its one run), so that copy is not counted in it."""
        if self.case.mode == "bwd":
            self._in_provider_layout(self._out)
        elif self.case.mode == "fwd_bwd":
            self._in_provider_layout(tuple(out.detach() for out in self._forward()))

    def _named(self, outs: tuple[torch.Tensor, ...] | Any) -> dict[str, Any]:
        named = self.op.named_results(outs if len(self.op.results) > 1 else outs[0])
        return {name: self._op_layout(t.detach() if isinstance(t, torch.Tensor) else t) for name, t in named.items()}

    def run(self) -> dict[str, Any]:
        mode = self.case.mode
        if mode == "fwd":
            return {name: self._op_layout(t) for name, t in self.op.named_results(self.call()).items()}
        outs = self._out if mode == "bwd" else self._forward()
        grads = self._grads(outs, retain=mode == "bwd")
        named = {grad_name(n): self._op_layout(g) for n, g in zip(self.op.grads, grads)}
        return named if mode == "bwd" else {**self._named(outs), **named}

    def named(self, timed_result: Any) -> dict[str, Any]:
        """What the timed call returned, named as `run()` names its outputs: the forward's outputs for fwd,
        the gradients for bwd and fwd_bwd (whose timed call returns those alone)."""
        if self.case.mode == "fwd":
            return {name: self._op_layout(t) for name, t in self.op.named_results(timed_result).items()}
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
                outs = self._forward()
                dys = self._in_provider_layout(outs)
                return lambda: torch.autograd.grad(outs, self.leaves, dys, retain_graph=True)

            return Staged(build)

        def build_both() -> Callable[[], Any]:
            dys = self._in_provider_layout(self._forward())
            results = self.op.named_results
            return lambda: torch.autograd.grad(tuple(results(self.call()).values()), self.leaves, dys)

        return Staged(build_both)
