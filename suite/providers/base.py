"""The provider interface: one way of computing one op, in one tier.

A provider says whether it can run a case here (and why not), prepares once outside the timed region
(layout changes, compilation) and hands back a zero-argument callable that the timer calls.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..ops.base import Case

Inputs = dict[str, torch.Tensor]
Prepared = Callable[[], torch.Tensor]


class Unavailable(Exception):
    """Raised by a provider that finds, while preparing, that it cannot run this case here."""


@dataclass(frozen=True)
class Provider:
    name: str
    tier: str
    op: str
    # (inputs, options, case) -> callable computing the op's output from those inputs.
    prepare: Callable[[Inputs, dict[str, Any], Case], Prepared]
    # (case, device) -> why it cannot run, or None. Must be cheap: it runs before any allocation.
    why_unavailable: Callable[[Case, torch.device], str | None] = field(default=lambda case, device: None)
    # Distribution whose version goes into the record (torch for the vendor and compiler tiers).
    package: str = "torch"
    # Views the output in the op's layout for the check (outside the timed call); identity for most.
    to_op_layout: Callable[[torch.Tensor], torch.Tensor] = field(default=lambda out: out)
    # What the latest call launched, for the record (the triton tier: its autotuner's pick), or None.
    describe_launch: Callable[[], str | None] = field(default=lambda: None)

    def version(self) -> str | None:
        return package_version(self.package)


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
