"""What the tests share to measure on the CPU: the timing they measure with, and a run context.

FAST keeps a measurement to a few milliseconds of timed calls (two rounds of two to four calls each), and
RUN_TIMING is what a test gives `tierbench run` (as overrides): the quick preset, whose three rounds the
paired verdicts of the history tests rely on. The tests judge what is recorded, never the times. The
ceilings are small, round numbers, so a record's speed-of-light fraction is defined without a measured
device.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tierbench.suite.ceilings import Ceilings
from tierbench.suite.measure.runner import RunContext
from tierbench.timing import CpuTimer, TimingSettings

CPU = torch.device("cpu")
FAST = TimingSettings(warmup_ms=1, rep_ms=1, rounds=2, min_reps=2, max_reps=4, flush_l2=False)
RUN_TIMING = ["timing=quick"]


def cpu_ceilings(dtypes: tuple[str, ...] = ("fp32", "bf16", "fp16")) -> Ceilings:
    return Ceilings(device_name="cpu", copy_gbps=10.0, matmul_tflops=dict.fromkeys(dtypes, 0.1))


def cpu_context(run_dir: Path, timing: TimingSettings = FAST, **fields: Any) -> RunContext:
    """A run context on the CPU writing into run_dir; `fields` override any of RunContext's (env, ceilings,
    run_id, metrics...)."""
    values: dict[str, Any] = {
        "run_id": "t",
        "run_dir": run_dir,
        "device": CPU,
        "timer": CpuTimer(timing),
        "ceilings": cpu_ceilings(),
        "env": {"device_name": "cpu", "device_type": "cpu"},
    }
    return RunContext(**(values | fields))
