"""The provider interface: one way of computing one op, in one tier.

A provider says whether it can run a case here (and why not), prepares once outside the timed region
(layout changes, compilation) and hands back a zero-argument callable that computes the op's output.
The backward modes need nothing more of it: the runner differentiates that callable with autograd (see
suite/measure/passes.py), against the inputs or, where the provider converted them, against its own copies.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..ops.base import Case, Op

Inputs = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Prepared:
    """What `prepare` returns: the forward call, and the tensors it reads in the provider's own layout
    (`leaves`, by input name) where it made copies; gradients are then taken against those copies, so a
    layout conversion done while preparing never lands in a timed backward."""

    call: Callable[[], Any]
    leaves: dict[str, torch.Tensor] | None = None


class Unavailable(Exception):
    """Raised by a provider that finds, while preparing, that it cannot run this case here."""


@dataclass(frozen=True)
class Provider:
    """One way of computing one op, in one tier: `call_provider` makes one from a function of the op's
    signature; its other fields serve providers that prepare (compile, convert layouts) or have rules."""

    name: str
    tier: str  # a tier's name (suite/tiers.py or a plugin's); the tier record says what it means
    op: str
    # (inputs, options, case) -> the forward call (or a Prepared); compilation and layout work happen here.
    prepare: Callable[[Inputs, dict[str, Any], Case], Callable[[], Any] | Prepared]
    # (case, device) -> why it cannot run, or None. Must be cheap: it runs before any allocation.
    why_unavailable: Callable[[Case, torch.device], str | None] = field(default=lambda case, device: None)
    # Distribution whose version goes into the record (torch for the vendor and compiler tiers).
    package: str = "torch"
    # Views an output (or gradient) in the op's layout for the check (outside the timed call); identity
    # for most. It must return a view, so the runner can also write an upstream gradient through it.
    to_op_layout: Callable[[torch.Tensor], torch.Tensor] = field(default=lambda out: out)
    # What the latest call launched, for the record (the triton tier: its autotuner's pick), or None.
    describe_launch: Callable[[], str | None] = field(default=lambda: None)
    # FLOPs this provider executes for a case where that differs from the op's work model (a backward
    # that recomputes, or one that does not); None: the model's count.
    executed_flops: Callable[[Case], float | None] = field(default=lambda case: None)
    # A provider whose library runs its device work through a runtime of its own (JAX, TVM, IREE, MAX) names
    # how that work is ordered on the timer's stream ("dlpack-stream-sync": DLPack's stream handshake in and
    # out); on a GPU it is then timed without a CUDA graph, and its record's timer says so. None: PyTorch's
    # own launches, which a graph captures.
    stream_join: str | None = None
    # Whether its kernels are the project's own code where its tier is mixed (the portable tier holds
    # tierbench's Mojo kernels and IREE's compiled formulas); None: as its tier says.
    own_code: bool | None = None
    # (case) -> the provider as a plain function of its op's signature, fn(*tensors, **options), where it is
    # one: what a composite op's composed strategies call on the chain's own tensors (suite/measure/compose.py).
    # None: it cannot be composed (its preparation does work per input that a call would have to repeat).
    function: Callable[[Case], Callable[..., Any]] | None = None
    # A provider made from the run's other measurements (a composite op's best mix): given the case and the
    # records so far (case id -> provider -> record), the provider to measure, or why there is none.
    from_results: Callable[[Case, Any], Provider | str] | None = None
    # A composed provider's choice per part of its op's chain (part -> provider), kept in its record.
    composition: tuple[tuple[str, str], ...] = ()

    def version(self) -> str | None:
        return package_version(self.package)


def call_provider(
    name: str,
    tier: str,
    op: Op,
    fn: Callable[..., Any],
    *,
    why_unavailable: Callable[[Case, torch.device], str | None] | None = None,
    package: str = "torch",
    describe_launch: Callable[[], str | None] | None = None,
) -> Provider:
    """A provider that calls `fn` through the op's signature: fn(*tensors in op order, **options).

    This is how a tier adapter, or a plugin's kernel, becomes a provider in one line.
    """

    def prepare(inputs: Inputs, options: dict[str, Any], case: Case) -> Callable[[], Any]:
        args = op.args(inputs)
        return lambda: fn(*args, **options)

    extra: dict[str, Any] = {"package": package, "function": lambda case: fn}
    if why_unavailable is not None:
        extra["why_unavailable"] = why_unavailable
    if describe_launch is not None:
        extra["describe_launch"] = describe_launch
    return Provider(name, tier, op.name, prepare, **extra)


def with_op_rule(provider: Provider, op: Op) -> Provider:
    """The provider with its op's own availability rule (a precision the device lacks) checked first."""
    rule = op.why_unavailable
    if rule is None:
        return provider
    own = provider.why_unavailable

    def why(case: Case, device: torch.device) -> str | None:
        return rule(case, device) or own(case, device)

    return dataclasses.replace(provider, why_unavailable=why)


def first_line(exc: BaseException) -> str:
    """An exception's type and first non-blank line (a compiler's refusal, as a record's reason)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:400]


def package_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def missing_module(module: str, pip_name: str) -> str | None:
    """A reason naming the pip package when `module` cannot be imported, else None."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        return f"package not installed: {module} ({exc.__class__.__name__}: {exc}); pip install {pip_name}"
    return None


def needs_cuda(device: torch.device) -> str | None:
    return None if device.type == "cuda" else f"needs a CUDA GPU (running on {device.type})"


def needs_compute_capability(
    device: torch.device, major: int, minor: int = 0, below: tuple[int, int] | None = None
) -> str | None:
    """None when the GPU's compute capability is in [major.minor, below), else the reason."""
    reason = needs_cuda(device)
    if reason:
        return reason
    cc = torch.cuda.get_device_capability(device)
    if cc < (major, minor):
        return f"compute capability {cc[0]}.{cc[1]} too old: needs {major}.{minor} or newer"
    if below is not None and cc >= below:
        return f"compute capability {cc[0]}.{cc[1]} not supported: needs below {below[0]}.{below[1]}"
    return None
