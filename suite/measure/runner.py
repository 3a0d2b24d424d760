"""Executes a plan: per case, inputs and reference once; per provider, check then time; records as they finish."""

from __future__ import annotations

import gc
import logging
import os
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from tierbench.interrupts import reraise_real
from tierbench.timing import CpuTimer, CudaEventTimer, Ungraphed, Watch

from ..ceilings import Ceilings
from ..ops.base import Case, Op, grad_name
from ..providers.base import Provider, Unavailable
from ..store.records import LAST_CALL_RAISED, LAST_OUTPUT_UNCHECKED, Measurement, RecordWriter, reads_as_oom
from ..tiers import BUILTIN, Tier
from ..units import sig
from . import profiling, progress, traffic
from .checking import check_all
from .envinfo import telemetry
from .passes import Pass, WrongOutput, leaf_inputs, reference_outputs
from .plan import PlannedCase

log = logging.getLogger("tierbench")

_QUANTILES = {"p10": 0.10, "p25": 0.25, "p75": 0.75, "p90": 0.90}


@dataclass
class RunContext:
    run_id: str
    run_dir: Path
    device: torch.device
    timer: CpuTimer | CudaEventTimer | None  # None in a run whose worker process times (suite/measure/isolation.py)
    ceilings: Ceilings
    env: dict[str, Any]
    seed: int = 0
    suite: str = ""
    tiers: dict[str, Tier] = field(default_factory=lambda: dict(BUILTIN))
    done: set[tuple[str, str]] = field(default_factory=set)
    # Package version per provider, looked up once per run: distribution metadata scans are slow.
    versions: dict[str, str | None] = field(default_factory=dict)
    # Measurements beyond the timed ones (config `metrics`): "traffic" runs ncu per checked provider.
    metrics: tuple[str, ...] = ()
    # A shard of a sweep: the sweep, "index/count", and who runs beside it now (suite/scale/shard_job.py).
    sweep: str | None = None
    shard: str | None = None
    neighbours: Callable[[], list[dict[str, Any]]] | None = None
    # Told before each step of a case (provider name or None for the case's own, what it is): the isolated
    # runner's worker passes it on, so that a crash or a time limit is charged to the step it happened in.
    step: Callable[[str | None, str], None] = field(default=lambda provider, what: None)
    # This run's records so far, case id -> provider -> record: what a composite's best mix is chosen from.
    results: dict[str, dict[str, Measurement]] = field(default_factory=dict)

    def note(self, record: Measurement) -> None:
        self.results.setdefault(record.case_id, {})[record.provider] = record

    def __post_init__(self) -> None:
        # Records go where the run started, whatever folder a provider moves the process to (os.chdir).
        self.run_dir = Path(self.run_dir).absolute()

    def beside(self, seen: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """The shards running beside this one now, added to those `seen` earlier in the case."""
        out = list(seen or [])
        for n in self.neighbours() if self.neighbours else []:
            if n not in out:
                out.append(n)
        return out

    def version_of(self, provider: Provider) -> str | None:
        if provider.name not in self.versions:
            self.versions[provider.name] = provider.version()
        return self.versions[provider.name]


# How allocators say they ran out: CUDA's caching allocator, and the CPU's (DefaultCPUAllocator, errno 12).
def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or reads_as_oom(str(exc))


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]


# A provider may raise anything (SystemExit, a KeyboardInterrupt of its own, any BaseException): each
# handler catches it all, hands a real interrupt on (tierbench.interrupts) and records the rest.
Caught = BaseException


def _release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


# Measures one case's providers and yields their records, putting what each profiled call launched into
# the dict it is given: measure_case here, or the isolated runner's worker (suite/measure/isolation.py).
CaseMeasure = Callable[[PlannedCase, list[Provider], dict[tuple[str, str], profiling.Profile]], Iterator[Measurement]]


def run_plan(
    plan: list[PlannedCase],
    ctx: RunContext,
    on_record: Callable[[Measurement], None] | None = None,
    live: bool | None = None,
    measure: CaseMeasure | None = None,
) -> list[Measurement]:
    """Measure every (case, provider) of the plan not already in ctx.done; returns the new records.

    `measure` measures one case (default: measure_case, in this process). Says how far it is
    (suite/measure/progress.py): a live line where stderr is a terminal (or `live`), log lines otherwise."""
    here = measure is None  # measured in this process: its memory is released after each case
    if measure is None:

        def measure(pc: PlannedCase, providers: list[Provider], profiles: dict) -> Iterator[Measurement]:
            return measure_case(pc.case, providers, ctx, pc.op, profiles)

    writer = RecordWriter(ctx.run_dir)
    launch_log = profiling.LaunchLog(ctx.run_dir)
    new: list[Measurement] = []
    todo = [(pc, [p for p in pc.providers if (pc.case.case_id, p.name) not in ctx.done]) for pc in plan]
    todo = [(pc, providers) for pc, providers in todo if providers]
    shown = progress.for_run(sum(len(providers) for _, providers in todo), live)
    try:
        for index, (pc, providers) in enumerate(todo, 1):
            shown.case(index, len(todo), pc.case, [p.name for p in providers])
            profiles: dict[tuple[str, str], profiling.Profile] = {}
            for record in measure(pc, providers, profiles):
                if record.key in ctx.done:  # never two records of one key, whatever a measurer sends
                    continue
                writer.append(record)
                if record.key in profiles:
                    launch_log.append(record.run_id, record.case_id, record.provider, profiles.pop(record.key))
                ctx.done.add(record.key)
                new.append(record)
                shown.record(record)
                if on_record:
                    on_record(record)
            if here:
                _release(ctx.device)
    finally:
        shown.close()
    return new


def new_record(
    ctx: RunContext,
    case: Case,
    provider: Provider,
    work: Any,
    status: str,
    reason: str = "",
    neighbours: list[dict[str, Any]] | None = None,
    **fields: Any,
) -> Measurement:
    """The record of one provider on one case; `work` is the op's work model of the case."""
    fields.setdefault("launches_reason", profiling.NOT_PROFILED)
    tier = ctx.tiers.get(provider.tier)
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
        suite=ctx.suite,
        own_code=provider.own_code if provider.own_code is not None else bool(tier and tier.own_code),
        sweep=ctx.sweep,
        shard=ctx.shard,
        neighbours=neighbours or [],
        composed=dict(provider.composition),
        **fields,
    )


def measure_case(
    case: Case,
    providers: list[Provider],
    ctx: RunContext,
    op: Op,
    profiles: dict[tuple[str, str], profiling.Profile] | None = None,
) -> Iterator[Measurement]:
    """Check every provider against one reference, profile each correct one's pass once, time the correct
    ones together, interleaved, then check each one's last timed output and the inputs again.
    `profiles` receives what each profiled call launched."""
    work = op.work(case)
    seen = ctx.beside()
    home = os.getcwd()

    def record(provider: Provider, status: str, reason: str = "", **fields: Any) -> Measurement:
        _go_home(home)
        made = new_record(ctx, case, provider, work, status, reason, seen, **fields)
        ctx.note(made)
        return made

    resolved = []
    for provider in providers:
        if provider.from_results is None:
            resolved.append(provider)
            continue
        ctx.step(provider.name, "choosing its composition from the records of the parts")
        try:  # a composite's best mix: chosen now, from the records of its parts
            made = provider.from_results(case, ctx.results)
        except Caught as exc:
            reraise_real(exc)
            made = f"choosing the composition failed: {describe(exc)}"
        if isinstance(made, str):
            yield record(provider, "skipped", made)
        else:
            resolved.append(made)

    runnable = []
    for provider in resolved:
        ctx.step(provider.name, "checking whether it can run here")
        try:
            why = provider.why_unavailable(case, ctx.device)
            if why is not None and not isinstance(why, str):
                why = f"availability check returned {type(why).__name__}, not a reason (str) or None"
        except Caught as exc:  # a broken availability rule skips only its provider
            reraise_real(exc)
            why = f"availability check failed: {describe(exc)}"
        if why:
            yield record(provider, "skipped", why)
        else:
            runnable.append(provider)
    if not runnable:
        return

    ctx.step(None, "making the case's inputs and reference")
    gen = torch.Generator(device=ctx.device).manual_seed(case.seed(ctx.seed))
    options = op.options(case)
    try:
        inputs = op.make_inputs(case, ctx.device, gen)
        refs, dy = reference_outputs(op, case, inputs, options, ctx.device, gen)
        inputs = leaf_inputs(op, case, inputs)
        pristine = {name: t.detach().clone() for name, t in inputs.items()}
    except Unavailable as exc:
        for provider in runnable:
            yield record(provider, "skipped", str(exc))
        return
    except Caught as exc:  # the case is lost, the run goes on
        reraise_real(exc)
        status = "oom" if is_oom(exc) else "error"
        for provider in runnable:
            yield record(provider, status, f"making inputs or reference: {describe(exc)}")
        return
    expected = _expected_dtypes(op, case, inputs)

    checked: dict[str, tuple[Provider, Pass, dict[str, Any]]] = {}
    for provider in runnable:
        tier = ctx.tiers.get(provider.tier)
        why_not_timed = tier.not_comparable(ctx.device.type) if tier else None
        # Checked but never timed on a CPU (Triton's interpreter): one pass is the check, nothing compiles.
        once = bool(why_not_timed) and ctx.device.type != "cuda"
        ctx.step(provider.name, "preparing, compiling and checking its output")
        outcome = _prepare_and_check(
            provider, op, case, inputs, options, refs, dy, ctx.device, expected, bool(why_not_timed), once
        )
        # Inputs the op writes by design (a decode step's KV cache) are restored, not a fault.
        if changed := [name for name in _restore(inputs, pristine) if name not in op.writes]:
            _release(ctx.device)
            yield record(provider, "error", f"wrote into its inputs ({', '.join(changed)}); they were restored")
            continue
        if isinstance(outcome, Failure):
            yield record(provider, outcome.status, outcome.reason, **outcome.facts)
            continue
        pass_, facts, profile = outcome
        facts.update(_profile(pass_, provider, case, ctx, profiles, profile))
        if changed := [name for name in _restore(inputs, pristine) if name not in op.writes]:
            yield record(provider, "error", f"wrote into its inputs ({', '.join(changed)}) while profiled; restored")
            continue
        if why_not_timed:
            yield record(provider, "skipped", why_not_timed, **facts)
            continue
        checked[provider.name] = (provider, pass_, facts)
    if not checked:
        return

    watch = _GuardInputs(ctx, inputs, pristine, op.writes)
    samples = ctx.timer.measure({name: _timed(provider, p) for name, (provider, p, _) in checked.items()}, watch)
    outputs = dict(getattr(ctx.timer, "outputs", {}))
    suspects = dict(watch.writers)
    unchecked: dict[str, tuple[str, str]] = {}  # the last timed call raised, or its output could not be checked
    for name, (_, pass_, _) in checked.items():
        if not isinstance(samples[name], list):
            continue
        status, why = _recheck(ctx, name, pass_, outputs.get(name), refs, expected)
        if status == "incorrect":
            suspects[name] = why
        elif status:
            unchecked[name] = (status, why)
    del refs, pristine, outputs
    ctx.step(None, "reading the device's state")
    seen = ctx.beside(seen)
    state = telemetry(ctx.device)
    for name, (provider, _, facts) in checked.items():
        result = samples[name]
        if name in watch.writers:
            yield record(provider, "error", watch.writers[name], telemetry=state, **facts)
            continue
        if isinstance(result, BaseException):
            status = "oom" if is_oom(result) else "error"
            yield record(provider, status, f"while timing: {describe(result)}", telemetry=state, **facts)
            continue
        if name in suspects or name in unchecked:
            status, why = unchecked.get(name) or ("incorrect", suspects[name])
            facts = {**facts, "rel_error": None, "element_error": None, "errors": {}}
            yield record(provider, status, why, telemetry=state, **facts)
            continue
        summary = summarize(result, work.flops, work.min_bytes, case.params["dtype"], ctx.ceilings)
        summary["warning"] = "; ".join(filter(None, [summary["warning"], _beside_suspects(name, suspects)]))
        yield record(
            provider, "ok", telemetry=state, timer=ctx.timer.kinds.get(name, ctx.timer.kind), **summary, **facts
        )


def _timed(provider: Provider, pass_: Pass):
    """What the timer times: the pass, never captured in a graph where the provider's own runtime launches it."""
    timed = pass_.timed()
    return Ungraphed(timed, provider.stream_join) if provider.stream_join else timed


def _go_home(home: str) -> None:
    """Back to the folder the case started in, where a provider moved the process (os.chdir)."""
    try:
        if os.getcwd() != home:
            os.chdir(home)
    except OSError:  # its folder is gone: paths of the run are absolute anyway
        pass


def _expected_dtypes(op: Op, case: Case, inputs: dict[str, torch.Tensor]) -> dict[str, torch.dtype]:
    """The dtype each checked output must have: the case's output dtype, each gradient its input's."""
    return {
        **dict.fromkeys(op.results, case.out_dtype),
        **{grad_name(n): inputs[n].dtype for n in op.grads if n in inputs},
    }


class _GuardInputs(Watch):
    """The timer's watch over one case: each step announced (ctx.step), and after each of a provider's
    steps its inputs compared with the pristine copies; one that wrote into them is dropped from the
    later rounds and the inputs restored, so no other provider is timed on what it left."""

    def __init__(
        self,
        ctx: RunContext,
        inputs: dict[str, torch.Tensor],
        pristine: dict[str, torch.Tensor],
        writes: tuple[str, ...] = (),
    ) -> None:
        self.ctx, self.inputs, self.pristine = ctx, inputs, pristine
        self.writes = writes  # inputs the op writes by design (a decode step's KV cache): restored, no fault
        self.writers: dict[str, str] = {}
        self.what = ""

    def step(self, name: str, what: str) -> None:
        self.what = what
        self.ctx.step(name, what)

    def after(self, name: str) -> None:
        if self.ctx.device.type == "cuda":
            torch.cuda.synchronize(self.ctx.device)
        if changed := [n for n in _restore(self.inputs, self.pristine) if n not in self.writes]:
            self.writers[name] = (
                f"wrote into its inputs ({', '.join(changed)}) while timed ({self.what}); they were restored "
                "before the next provider's turn"
            )
            raise InputsChanged(self.writers[name])


class InputsChanged(RuntimeError):
    """A provider changed its inputs during the timed rounds."""


def _recheck(
    ctx: RunContext,
    name: str,
    pass_: Pass,
    output: Any,
    refs: dict[str, torch.Tensor],
    expected: dict[str, torch.dtype],
) -> tuple[str, str]:
    """A provider's last timed output checked again: ("", "") when it passes; ("incorrect", why) when it fails
    the check its checked output passed; ("oom" or "error", why) when that call raised, or when its output
    could not be checked (never a verdict of wrong: nothing wrong was seen). A check that runs out of memory
    beside what the timed rounds left (their CUDA graphs' pools) is tried once more after freeing the cache."""
    ctx.step(name, "checking its last timed output")
    if isinstance(output, BaseException):
        status = "oom" if is_oom(output) else "error"
        return status, f"{LAST_CALL_RAISED}{describe(output)} (its checked call passed)"
    for attempt in (1, 2):
        try:
            outs = pass_.named(output)
            # fwd_bwd's timed call returns the gradients alone: the forward's outputs are checked where returned.
            grads = {grad_name(n) for n in pass_.op.grads}
            wanted = {k: v for k, v in refs.items() if k in outs or k in grads}
            op = pass_.op
            verdict = check_all(
                outs, wanted, pass_.case.out_dtype, pass_.case.dtype, op.gradient_element_tolerance, op.tolerance,
                expected,
            )  # fmt: skip
            break
        except Caught as exc:
            reraise_real(exc)
            if attempt == 2 or not is_oom(exc):
                status = "oom" if is_oom(exc) else "error"
                return status, f"{LAST_OUTPUT_UNCHECKED}{describe(exc)}"
        _release(ctx.device)  # out of the handler: the failed check's frames, and what they held, are gone
    if verdict.ok:
        return "", ""
    return "incorrect", f"its last timed output fails the check its checked output passed: {verdict.reason}"


def _beside_suspects(name: str, suspects: dict[str, str]) -> str:
    """A warning for a provider timed in the same rounds as one caught misbehaving while timed."""
    others = sorted(n for n in suspects if n != name)
    if not others:
        return ""
    return (
        f"timed in the same rounds as {', '.join(others)}, caught misbehaving while timed (its inputs were "
        "checked and restored after each of its turns): compare these numbers with care"
    )


def _profile(
    pass_: Pass,
    provider: Provider,
    case: Case,
    ctx: RunContext,
    profiles: dict[tuple[str, str], profiling.Profile] | None,
    profile: profiling.Profile | None = None,
) -> dict[str, Any]:
    """One more call of a checked pass, outside timing (unless its checked run was profiled already): what
    it launched, and with metrics=[traffic] the device-memory bytes it moved, measured by ncu."""
    if profile is None and provider.stream_join and ctx.device.type != "cuda":
        profile = profiling.Profile(None, profiling.OWN_RUNTIME_REASON, [], profiling.CPU_COUNTED)
    elif profile is None:
        ctx.step(provider.name, "being profiled (one call, never timed)")
        profile = profiling.profile_pass(pass_, ctx.device)
    if profiles is not None:
        profiles[(case.case_id, provider.name)] = profile
    fields = profile.fields()
    if "traffic" in ctx.metrics:
        ctx.step(provider.name, "measuring its memory traffic under ncu")
        fields.update(traffic.measure(ctx.run_dir, case.case_id, provider.name, ctx.device))
    return fields


def _restore(inputs: dict[str, torch.Tensor], pristine: dict[str, torch.Tensor]) -> list[str]:
    """Names of the inputs a provider changed (restored from the pristine copies), [] when none was.

    Restored through `.data`, so no autograd version counter moves: a backward another provider's timed
    call will replay still finds the tensors it saved."""
    changed = []
    with torch.no_grad():
        for name, t in inputs.items():
            if not _same(t, pristine[name]):
                t.data.copy_(pristine[name])
                changed.append(name)
    return changed


def _same(t: torch.Tensor, pristine: torch.Tensor) -> bool:
    """Bit for bit; 1-byte floats (FP8) as bytes, since comparisons are not implemented for them everywhere."""
    if t.is_floating_point() and t.element_size() == 1:
        return torch.equal(t.view(torch.uint8), pristine.view(torch.uint8))
    return torch.equal(t, pristine)


def _prepare_and_check(
    provider: Provider,
    op: Op,
    case: Case,
    inputs: dict[str, torch.Tensor],
    options: dict[str, Any],
    refs: dict[str, torch.Tensor],
    dy: torch.Tensor | None,
    device: torch.device,
    expected: dict[str, torch.dtype] | None = None,
    profile_check: bool = False,
    once: bool = False,
):
    """Prepare and run the pass once (compilation, autotuning), then run it again and check that result.

    The second run is the one that resembles a timed call: its peak memory is the pass's footprint (an
    autotuner's benchmarking buffers of the first run are not; for the backward, the forward's saved
    tensors are the baseline), and its outputs are what gets checked. With `profile_check` (a pass never
    timed here) that run is also the profiled one; with `once` (such a pass on a CPU, where nothing compiles)
    the first run is the one profiled and checked. Returns (pass, facts, profile or None) or a Failure.
    """
    on_gpu = device.type == "cuda"
    prepare_s = None
    profile = None
    try:
        start = time.perf_counter()
        pass_ = Pass(op, case, provider, provider.prepare(inputs, options, case), inputs, dy)
        pass_.setup()
        if once:
            pass_.prime()
            outs, profile = profiling.profiled_run(pass_, device)
        else:
            pass_.run()
        if on_gpu:
            torch.cuda.synchronize(device)
        prepare_s = time.perf_counter() - start
        if on_gpu:
            _poison_free_memory(refs, case.out_dtype)
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            baseline = torch.cuda.memory_allocated(device)
        if once:
            pass  # the first run was the profiled and checked one
        elif profile_check:
            outs, profile = profiling.profiled_run(pass_, device)
        else:
            outs = pass_.run()
        if on_gpu:
            torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - baseline if on_gpu else None
        verdict = check_all(
            outs, refs, case.out_dtype, case.dtype, op.gradient_element_tolerance, op.tolerance, expected
        )
        del outs
        pass_.release()
    except Unavailable as exc:
        return _failure("skipped", str(exc))
    except WrongOutput as exc:
        return _failure("incorrect", str(exc), prepare_s=prepare_s)
    except Caught as exc:  # one provider's failure is its own record
        reraise_real(exc)
        _release(device)
        return _failure("oom" if is_oom(exc) else "error", describe(exc), prepare_s=prepare_s)
    facts = {
        "rel_error": verdict.rel_error,
        "tolerance": verdict.tolerance,
        "element_error": verdict.element_error,
        "errors": verdict.errors,
        "element_errors": verdict.element_errors,
        "element_tolerances": verdict.element_tolerances,
        "peak_mem_bytes": peak,
        "prepare_s": prepare_s,
        "launch": _launch_of(provider),
        "executed_flops": _executed_flops(provider, case),
    }
    if not verdict.ok:
        return _failure("incorrect", verdict.reason, **facts)
    return pass_, facts, profile


def _launch_of(provider: Provider) -> str | None:
    """The provider's account of the call just checked (the one the timed calls repeat), if it gives one."""
    try:
        return provider.describe_launch()
    except Caught as exc:  # a description is a courtesy: it never costs the measurement
        reraise_real(exc)
        return None


def _executed_flops(provider: Provider, case: Case) -> float | None:
    try:
        return provider.executed_flops(case)
    except Caught as exc:  # a courtesy too
        reraise_real(exc)
        return None


@dataclass
class Failure:
    status: str
    reason: str
    facts: dict[str, Any] = field(default_factory=dict)


def _failure(status: str, reason: str, **facts: Any) -> Failure:
    return Failure(status, reason, facts)


def _poison_free_memory(refs: dict[str, torch.Tensor], dtype: torch.dtype) -> None:
    """Fill freed blocks of the outputs' sizes with NaN, so an output the kernel never wrote shows up."""
    for ref in refs.values():
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
    peak = ceilings.peak_tflops(dtype)
    memory_floor = min_bytes / (ceilings.copy_gbps * 1e9)
    # Without a ceiling for the case's precision (an FP8 rate not measured here) no SOL is stated at all:
    # a 16-bit peak would overstate it.
    compute_floor = flops / (peak * 1e12) if peak else None
    return {
        "warning": spread_warning(median, quantiles),
        "median_ms": median,
        "min_ms": ordered[0],
        "quantiles_ms": quantiles,
        "samples_ms": [round(s, 5) for s in samples_ms],  # 10 ns resolution: events are no finer
        "tflops": flops / seconds / 1e12,
        "gbps": min_bytes / seconds / 1e9,
        "sol": max(compute_floor, memory_floor) / seconds if compute_floor is not None else None,
        "bound": ("compute" if compute_floor >= memory_floor else "memory") if compute_floor is not None else None,
    }


# (p90 - p10) / median above this: the samples disagree so much that their median says little.
WIDE_SPREAD = 0.5


def spread_warning(median: float, quantiles: dict[str, float]) -> str:
    """A warning when the p10-p90 range of the samples is wider than WIDE_SPREAD of their median, else ''."""
    lo, hi = quantiles.get("p10"), quantiles.get("p90")
    if lo is None or hi is None or not median > 0 or (hi - lo) / median <= WIDE_SPREAD:
        return ""
    return (
        f"wide spread: p10 {sig(lo)} ms and p90 {sig(hi)} ms around a median of {sig(median)} ms "
        f"((p90 - p10) / median = {sig((hi - lo) / median, 2)} > {WIDE_SPREAD:g}): this median means little; "
        "is the machine busy with other work?"
    )
