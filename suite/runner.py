"""Executes a plan: per case, inputs and reference once; per provider, check then time; records as they finish."""

from __future__ import annotations

import gc
import logging
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .ceilings import Ceilings
from .checking import check
from .envinfo import telemetry
from .ops import OPS
from .ops.base import Case
from .plan import PlannedCase
from .providers.base import Provider, Unavailable
from .providers.triton_tier import interpreted
from .records import Measurement, RecordWriter
from .timing import CpuTimer, CudaEventTimer

log = logging.getLogger("tierbench")

_QUANTILES = {"p10": 0.10, "p25": 0.25, "p75": 0.75, "p90": 0.90}


@dataclass
class RunContext:
    run_id: str
    run_dir: Path
    device: torch.device
    timer: CpuTimer | CudaEventTimer
    ceilings: Ceilings
    env: dict[str, Any]
    seed: int = 0
    done: set[tuple[str, str]] = field(default_factory=set)
    # Package version per provider, looked up once per run: distribution metadata scans are slow.
    versions: dict[str, str | None] = field(default_factory=dict)

    def version_of(self, provider: Provider) -> str | None:
        if provider.name not in self.versions:
            self.versions[provider.name] = provider.version()
        return self.versions[provider.name]


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]


def _release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def run_plan(
    plan: list[PlannedCase], ctx: RunContext, on_record: Callable[[Measurement], None] | None = None
) -> list[Measurement]:
    """Measure every (case, provider) of the plan not already in ctx.done; returns the new records."""
    writer = RecordWriter(ctx.run_dir)
    new: list[Measurement] = []
    todo = [(pc.case, [p for p in pc.providers if (pc.case.case_id, p.name) not in ctx.done]) for pc in plan]
    todo = [(case, providers) for case, providers in todo if providers]
    for index, (case, providers) in enumerate(todo, 1):
        log.info(
            "[%d/%d] %s %s (%s): %s",
            index,
            len(todo),
            case.op,
            case.label,
            case.params["dtype"],
            ", ".join(p.name for p in providers),
        )
        for record in measure_case(case, providers, ctx):
            writer.append(record)
            ctx.done.add(record.key)
            new.append(record)
            if on_record:
                on_record(record)
        _release(ctx.device)
    return new


def measure_case(case: Case, providers: list[Provider], ctx: RunContext) -> Iterator[Measurement]:
    """Check every provider against one reference, then time the correct ones together, interleaved."""
    op = OPS[case.op]
    work = op.work(case)

    def record(provider: Provider, status: str, reason: str = "", **fields: Any) -> Measurement:
        return Measurement(
            run_id=ctx.run_id,
            op=case.op,
            family=case.family,
            case=case.to_json(),
            case_id=case.case_id,
            label=case.label,
            x=case.x,
            provider=provider.name,
            tier=provider.tier,
            status=status,
            reason=reason,
            flops=work.flops,
            min_bytes=work.min_bytes,
            provider_version=ctx.version_of(provider),
            env=ctx.env,
            **fields,
        )

    runnable = []
    for provider in providers:
        try:
            why = provider.why_unavailable(case, ctx.device)
        except Exception as exc:  # noqa: BLE001 - a broken availability rule skips only its provider
            why = f"availability check failed: {describe(exc)}"
        if why:
            yield record(provider, "skipped", why)
        else:
            runnable.append(provider)
    if not runnable:
        return

    gen = torch.Generator(device=ctx.device).manual_seed(case.seed(ctx.seed))
    try:
        inputs = op.make_inputs(case, ctx.device, gen)
        ref = op.reference(inputs, case)
    except Exception as exc:  # noqa: BLE001 - the case is lost, the run goes on
        status = "oom" if is_oom(exc) else "error"
        for provider in runnable:
            yield record(provider, status, f"making inputs or reference: {describe(exc)}")
        return
    options = op.options(case)

    checked: dict[str, tuple[Provider, Callable[[], Any], dict[str, Any]]] = {}
    for provider in runnable:
        outcome = _prepare_and_check(provider, inputs, options, case, ref, ctx.device)
        if isinstance(outcome, Failure):
            yield record(provider, outcome.status, outcome.reason, **outcome.facts)
            continue
        fn, facts = outcome
        if provider.tier == "triton" and interpreted():
            yield record(
                provider,
                "skipped",
                "correct, not timed: TRITON_INTERPRET=1 runs the kernel through "
                "Triton's CPU interpreter, whose speed means nothing",
                **facts,
            )
            continue
        checked[provider.name] = (provider, fn, facts)
    del ref
    if not checked:
        return

    samples = ctx.timer.measure({name: fn for name, (_, fn, _) in checked.items()})
    state = telemetry(ctx.device)
    for name, (provider, _, facts) in checked.items():
        result = samples[name]
        if isinstance(result, BaseException):
            status = "oom" if is_oom(result) else "error"
            yield record(provider, status, f"while timing: {describe(result)}", telemetry=state, **facts)
            continue
        yield record(
            provider,
            "ok",
            telemetry=state,
            timer=ctx.timer.kinds.get(name, ctx.timer.kind),
            **summarize(result, work.flops, work.min_bytes, case.params["dtype"], ctx.ceilings),
            **facts,
        )


def _prepare_and_check(
    provider: Provider,
    inputs: dict[str, torch.Tensor],
    options: dict[str, Any],
    case: Case,
    ref: torch.Tensor,
    device: torch.device,
):
    """Prepare and run once (compilation, autotuning), then run again and check that output.

    The second call is the one that resembles a timed call: its peak memory is the provider's footprint
    (an autotuner's benchmarking buffers of the first call are not), and its output is what gets checked.
    Returns (callable, facts) or a Failure.
    """
    on_gpu = device.type == "cuda"
    prepare_s = None
    try:
        start = time.perf_counter()
        fn = provider.prepare(inputs, options, case)
        fn()
        if on_gpu:
            torch.cuda.synchronize(device)
        prepare_s = time.perf_counter() - start
        if on_gpu:
            _poison_free_memory(ref, case.dtype)
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            baseline = torch.cuda.memory_allocated(device)
        out = fn()
        if on_gpu:
            torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - baseline if on_gpu else None
        verdict = check(provider.to_op_layout(out), ref, case.dtype)
        del out
    except Unavailable as exc:
        return _failure("skipped", str(exc))
    except Exception as exc:  # noqa: BLE001 - one provider's failure is its own record
        _release(device)
        return _failure("oom" if is_oom(exc) else "error", describe(exc), prepare_s=prepare_s)
    facts = {
        "rel_error": verdict.rel_error,
        "tolerance": verdict.tolerance,
        "peak_mem_bytes": peak,
        "prepare_s": prepare_s,
        "launch": _launch_of(provider),
    }
    if not verdict.ok:
        return _failure("incorrect", verdict.reason, **facts)
    return fn, facts


def _launch_of(provider: Provider) -> str | None:
    """The provider's account of the call just checked (the one the timed calls repeat), if it gives one."""
    try:
        return provider.describe_launch()
    except Exception:  # noqa: BLE001 - a description is a courtesy: it never costs the measurement
        return None


@dataclass
class Failure:
    status: str
    reason: str
    facts: dict[str, Any] = field(default_factory=dict)


def _failure(status: str, reason: str, **facts: Any) -> Failure:
    return Failure(status, reason, facts)


def _poison_free_memory(ref: torch.Tensor, dtype: torch.dtype) -> None:
    """Fill a freed block of the output's size with NaN, so an output the kernel never wrote shows up."""
    block = torch.full(ref.shape, float("nan"), dtype=dtype, device=ref.device)
    del block


def summarize(
    samples_ms: list[float], flops: float, min_bytes: float, dtype: str, ceilings: Ceilings
) -> dict[str, Any]:
    """Median and spread of the samples; achieved rates; the fraction of the binding ceiling."""
    median = statistics.median(samples_ms)
    ordered = sorted(samples_ms)
    quantiles = {name: ordered[min(len(ordered) - 1, int(q * len(ordered)))] for name, q in _QUANTILES.items()}
    seconds = median * 1e-3
    compute_floor = flops / (ceilings.peak_tflops(dtype) * 1e12)
    memory_floor = min_bytes / (ceilings.copy_gbps * 1e9)
    return {
        "median_ms": median,
        "min_ms": ordered[0],
        "quantiles_ms": quantiles,
        "samples_ms": [round(s, 5) for s in samples_ms],  # 10 ns resolution: events are no finer
        "tflops": flops / seconds / 1e12,
        "gbps": min_bytes / seconds / 1e9,
        "sol": max(compute_floor, memory_floor) / seconds,
        "bound": "compute" if compute_floor >= memory_floor else "memory",
    }
