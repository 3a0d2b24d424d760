"""The triton tier: tierbench's own Triton kernels (tierbench.kernels), each called through its op's signature."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch

from ..ops.base import Case, Op
from ..tiers import interpreted
from .base import Inputs, Provider, missing_module


def _kernels() -> Any:
    # Imported late: Triton reads TRITON_INTERPRET when the kernels are defined.
    return importlib.import_module("tierbench.kernels")


def _why_unavailable(op: Op) -> Callable[[Case, torch.device], str | None]:
    def why(case: Case, device: torch.device) -> str | None:
        reason = missing_module("triton", "triton")
        if reason:
            return reason
        if device.type == "cpu" and not interpreted():
            return "needs a CUDA GPU, or TRITON_INTERPRET=1 to check the kernels on the CPU"
        dtypes = _kernels().DTYPES.get(op.kernel)
        if dtypes is not None and case.dtype not in dtypes:
            names = " and ".join(str(d).removeprefix("torch.") for d in dtypes)
            return f"dtype {case.params['dtype']} unsupported: the triton {op.kernel} kernel takes {names}"
        needs = getattr(_kernels(), "COMPUTE_CAPABILITY", {}).get(op.kernel)
        if needs is not None and device.type == "cuda":
            (major, minor), what = needs
            cc = torch.cuda.get_device_capability(device)
            if cc < (major, minor):
                return (
                    f"compute capability {cc[0]}.{cc[1]} too old: the triton {op.kernel} kernel needs "
                    f"{major}.{minor} or newer ({what})"
                )
        return None

    return why


def _prepare(op: Op):
    def prepare(inputs: Inputs, options: dict[str, Any], case: Case):
        fn = getattr(_kernels(), op.kernel)
        args = op.args(inputs)
        return lambda: fn(*args, **options)

    return prepare


def _describe_launch(op: Op) -> Callable[[], str | None]:
    def describe() -> str | None:
        from tierbench.kernels._common import launch_with_backward

        log = _kernels().LAUNCH_LOGS.get(op.kernel or "")
        return launch_with_backward(log) if log else None

    return describe


def providers(ops: list[Op]) -> list[Provider]:
    return [
        Provider(
            "triton",
            "triton",
            op.name,
            _prepare(op),
            _why_unavailable(op),
            package="triton",
            describe_launch=_describe_launch(op),
            executed_flops=op.kernel_flops or (lambda case: None),
            function=lambda case, kernel=op.kernel: getattr(_kernels(), kernel),
        )
        for op in ops
        if op.kernel
    ]
