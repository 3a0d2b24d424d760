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
        from tierbench.kernels._common import last_launch

        # tierbench.kernels keeps one launch log per kernel family, named after the op family unless it says
        log = getattr(_kernels(), "LAUNCH_LOGS", {}).get(op.kernel, op.family)
        return last_launch(log)

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
        )
        for op in ops
        if op.kernel
    ]
