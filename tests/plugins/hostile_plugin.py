"""A plugin whose providers misbehave every way a kernel can, for the tests of isolation and checking.

Each provider computes RMSNorm (the built-in op) or fails at it in one way: a hang, a segfault, an abort,
an exit of the process, SystemExit, wrong kinds of output, a wrong dtype, a write into its inputs only
while timed, an output that goes wrong only while timed, a change of the working folder, an output whose
check runs out of memory. Calls are counted
per provider: before the timed rounds a provider's call runs three times (the preparing call, the checked
call, the profiled call), so "from the fourth call on" means "only while timed".
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from tierbench.suite.ops.norm import RMS_NORM
from tierbench.suite.providers.base import Provider
from tierbench.suite.tiers import plugin_tier

TIERS = [plugin_tier("hostile", "misbehaving providers (tests)", own_code=True)]
CALLS_BEFORE_TIMING = 3


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _provider(name: str, body: Callable[[int, torch.Tensor, torch.Tensor, float], Any]) -> Provider:
    """A provider whose call is body(call number from 1, x, weight, eps)."""

    def prepare(inputs: dict[str, torch.Tensor], options: dict[str, Any], case: Any) -> Callable[[], Any]:
        x, weight, eps = inputs["x"], inputs["weight"], options["eps"]
        count = [0]

        def call() -> Any:
            count[0] += 1
            return body(count[0], x, weight, eps)

        return call

    return Provider(name, "hostile", RMS_NORM.name, prepare, package="hostile-plugin")


def _hang(n, x, w, eps):
    time.sleep(10**6)


def _segfault(n, x, w, eps):
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def _segfault_while_timed(n, x, w, eps):
    if n > CALLS_BEFORE_TIMING:
        ctypes.string_at(0)
    return rms_norm(x, w, eps)


def _abort(n, x, w, eps):
    os.abort()


def _exit(n, x, w, eps):
    os._exit(0)


def _sys_exit(n, x, w, eps):
    sys.exit(3)


def _write_while_timed(n, x, w, eps):
    if n > CALLS_BEFORE_TIMING:
        with torch.no_grad():
            x.data.zero_()
    return rms_norm(x, w, eps)


def _wrong_while_timed(n, x, w, eps):
    out = rms_norm(x, w, eps)
    return out if n <= CALLS_BEFORE_TIMING else torch.zeros_like(out)


def _runs_out_of_memory(n, x, w, eps):
    raise torch.OutOfMemoryError("out of memory in a runtime with a pool of its own")


class _FailsToBeChecked(torch.Tensor):
    """An output whose every use but reading its shape and dtype runs out of memory, `failures` times."""

    failures = 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") != "__get__" and cls.failures > 0:
            cls.failures -= 1
            raise torch.OutOfMemoryError("CUDA out of memory while the output was checked")
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


def _check_runs_out_of_memory(times: int) -> Callable[[int, torch.Tensor, torch.Tensor, float], Any]:
    """Right every call; from the fourth call on its output runs out of memory where it is used `times` times
    (the harness's check of the last timed output, beside what the timed rounds hold)."""

    def body(n, x, w, eps):
        out = rms_norm(x, w, eps)
        if n <= CALLS_BEFORE_TIMING:
            return out
        failing = type(f"FailsToBeChecked{times}", (_FailsToBeChecked,), {})
        failing.failures = times
        return out.as_subclass(failing)

    return body


def _chdir(n, x, w, eps):
    os.chdir("/")
    return rms_norm(x, w, eps)


PROVIDERS = [
    # Wrong answers first: their records are written before any provider below stops the process.
    _provider("returns-none", lambda n, x, w, eps: None),
    _provider("returns-float", lambda n, x, w, eps: 1.0),
    _provider("returns-tuple", lambda n, x, w, eps: (rms_norm(x, w, eps),)),
    _provider("returns-ndarray", lambda n, x, w, eps: np.asarray(rms_norm(x, w, eps).detach())),
    _provider("returns-nan", lambda n, x, w, eps: torch.full_like(x, float("nan"))),
    _provider("wrong-shape", lambda n, x, w, eps: rms_norm(x, w, eps)[:, :-1]),
    _provider("wrong-dtype", lambda n, x, w, eps: rms_norm(x, w, eps).double()),
    # A runtime of its own (its device work joined to the timer's stream) that runs out of memory keeps its
    # pool: the providers after it are measured in a new process.
    dataclasses.replace(_provider("oom-keeps-pool", _runs_out_of_memory), stream_join="dlpack-stream-sync"),
    _provider("sys-exits", _sys_exit),
    _provider("hangs", _hang),
    _provider("segfaults", _segfault),
    _provider("aborts", _abort),
    _provider("exits", _exit),
    _provider("writes-while-timed", _write_while_timed),
    _provider("wrong-while-timed", _wrong_while_timed),
    _provider("segfaults-while-timed", _segfault_while_timed),
    _provider("chdirs", _chdir),
    _provider("check-runs-out-of-memory", _check_runs_out_of_memory(10**6)),
    _provider("check-runs-out-of-memory-once", _check_runs_out_of_memory(1)),
]
