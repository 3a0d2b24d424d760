"""What one call launched: the kernels (on a CPU, the operators) of one profiled pass, never a timed one.

The runner profiles each checked provider's pass once with PyTorch's profiler, after the check and before
the timing rounds. What counts as one launch:
- on a GPU: each device activity the call enqueued, kernels, memsets and memcpys alike (each one is a pass
  over device memory), with its own device time;
- on a CPU: each outermost operator call that computes: an aten operator counts once with all it calls
  inside (F.layer_norm is one, x + b then GELU then LayerNorm three); operators that only allocate, view
  or hand over to another operator count nothing themselves, but what they call does; a backward counts
  the operators its autograd nodes run; a Triton kernel that the CPU interpreter runs counts once (the
  interpreter runs it in numpy, so each launch is marked for the profiler while profiled). Inductor's
  compiled C++ kernels record no event at all, so a compiled call's count on a CPU is null, with that reason.
Both counts are read from the Chrome trace the profiler exports, the file `tierbench profile` writes.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..store.records import LAUNCHES_FILE, JsonLines
from ..tiers import interpreted
from .passes import Pass

# Chrome-trace categories of the device activities a call enqueues, and what each is called here.
DEVICE_ACTIVITIES = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
GPU_COUNTED = "device kernels, memsets and memcpys"
CPU_COUNTED = "outermost computing operators (CPU)"
# Operators that allocate, re-view or hand over to another operator: they count nothing themselves.
PASS_THROUGH_OPS = frozenset(
    "aten::" + name
    for name in (
        "empty empty_like empty_strided new_empty new_empty_strided resize_ set_ view _unsafe_view view_as "
        "reshape _reshape_alias as_strided expand expand_as t transpose permute movedim detach alias lift_fresh "
        "unsqueeze squeeze select slice narrow split split_with_sizes chunk unbind flatten unflatten diagonal "
        "contiguous to type_as result_type broadcast_tensors"
    ).split()
)
TRITON_MARK = "triton::"  # the profiler event around one Triton launch under the CPU interpreter
COMPILED_MARKS = ("Torch-Compiled Region", "CompiledFunction", "## Call CompiledFxGraph")
COMPILED_REASON = (
    "Inductor's compiled C++ kernels record no profiler event on a CPU, so their launches cannot be counted "
    "(on a GPU each one is a device kernel)"
)
OWN_RUNTIME_REASON = (
    "runs its compiled code through a runtime of its own (JAX, TVM, IREE, MAX), which records no profiler event "
    "on a CPU, so its launches cannot be counted (on a GPU each of its kernels is a device activity)"
)
NOT_PROFILED = "not profiled: only a pass that ran and passed its check is"
# Child and parent intervals share one clock, but the trace rounds them to nanoseconds.
_NESTING_SLACK_US = 0.01


@dataclass(frozen=True)
class Launch:
    name: str
    us: float  # its own device time on a GPU; on a CPU the operator's time, what it calls included
    kind: str = "kernel"  # kernel, memcpy, memset; operator or triton kernel on a CPU


@dataclass
class Profile:
    """The launches of one profiled call: their number (None with a reason where it cannot be counted)."""

    launches: int | None
    reason: str = ""
    kernels: list[Launch] = field(default_factory=list)
    counted: str = ""  # what a launch is here (GPU_COUNTED or CPU_COUNTED)

    def fields(self) -> dict[str, Any]:
        """The record's fields."""
        return {"launches": self.launches, "launches_reason": self.reason}


# -- reading a Chrome trace --------------------------------------------------------------------------


def _complete_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else []
    return [
        e
        for e in events
        if isinstance(e, dict) and e.get("ph") == "X" and isinstance(e.get("ts"), (int, float)) and "name" in e
    ]


def count_device(trace: dict[str, Any]) -> Profile:
    """A GPU call's launches: every kernel, memset and memcpy of the trace, in the order they ran."""
    events = sorted(
        (e for e in _complete_events(trace) if e.get("cat") in DEVICE_ACTIVITIES), key=lambda e: float(e["ts"])
    )
    if not events:
        return Profile(None, "the profiler saw no device activity (is CUPTI available to PyTorch?)", [], GPU_COUNTED)
    kernels = [Launch(str(e["name"]), float(e.get("dur", 0.0)), DEVICE_ACTIVITIES[e["cat"]]) for e in events]
    return Profile(len(kernels), "", kernels, GPU_COUNTED)


@dataclass
class _Node:
    name: str
    start: float
    end: float
    children: list[_Node] = field(default_factory=list)


def _forest(events: list[dict[str, Any]]) -> list[_Node]:
    """The events' nesting per thread (a child lies inside its parent's interval): the outermost ones."""
    threads: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for e in events:
        threads.setdefault((str(e.get("pid")), str(e.get("tid"))), []).append(e)
    roots: list[_Node] = []
    for group in threads.values():
        group.sort(key=lambda e: (float(e["ts"]), -float(e.get("dur", 0.0))))
        stack: list[_Node] = []
        for e in group:
            start = float(e["ts"])
            node = _Node(str(e["name"]), start, start + float(e.get("dur", 0.0)))
            while stack and (node.start >= stack[-1].end or node.end > stack[-1].end + _NESTING_SLACK_US):
                stack.pop()
            (stack[-1].children if stack else roots).append(node)
            stack.append(node)
    return sorted(roots, key=lambda n: n.start)


def count_cpu(trace: dict[str, Any]) -> Profile:
    """A CPU call's launches: its outermost computing operators and interpreted Triton kernels."""
    events = [e for e in _complete_events(trace) if e.get("cat") in ("cpu_op", "user_annotation")]
    if any(str(e["name"]).startswith(COMPILED_MARKS) for e in events):
        return Profile(None, COMPILED_REASON, [], CPU_COUNTED)
    found: list[Launch] = []

    def visit(node: _Node) -> None:
        if node.name.startswith(TRITON_MARK):
            found.append(Launch(node.name.removeprefix(TRITON_MARK), node.end - node.start, "triton kernel"))
        elif node.name.startswith("aten::") and node.name not in PASS_THROUGH_OPS:
            found.append(Launch(node.name, node.end - node.start, "operator"))
        else:  # a pass-through operator, an autograd node, a region someone marked: look inside
            for child in node.children:
                visit(child)

    for root in _forest(events):
        visit(root)
    return Profile(len(found), "", found, CPU_COUNTED)


def count(trace: dict[str, Any], device_type: str) -> Profile:
    return count_device(trace) if device_type == "cuda" else count_cpu(trace)


# -- profiling a call --------------------------------------------------------------------------------


@contextlib.contextmanager
def _marked_interpreter_launches() -> Iterator[None]:
    """Under Triton's CPU interpreter, each kernel launch inside a profiler event named after the kernel."""
    if not interpreted():
        yield
        return
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        yield
        return
    original = InterpretedFunction.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("warmup"):
            return original(self, *args, **kwargs)
        with torch.profiler.record_function(TRITON_MARK + str(getattr(self, "__name__", "kernel"))):
            return original(self, *args, **kwargs)

    InterpretedFunction.run = run
    try:
        yield
    finally:
        InterpretedFunction.run = original


def trace_call(call: Callable[[], Any], device: torch.device, path: Path | None = None) -> tuple[Any, dict[str, Any]]:
    """Run `call` once under PyTorch's profiler: its result and its Chrome trace (also written to `path`)."""
    from torch.profiler import ProfilerActivity, profile

    # Kineto prints a line at each start and stop unless its log level is raised; read at its first use.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
        torch.cuda.synchronize(device)
    with _marked_interpreter_launches(), profile(activities=activities) as prof:
        result = call()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(path))
        return result, json.loads(path.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "call.trace.json"
        prof.export_chrome_trace(str(target))
        return result, json.loads(target.read_text())


def profiled_run(pass_: Pass, device: torch.device) -> tuple[Any, Profile]:
    """`pass_.run()` under the profiler: its outputs and launches. For a pass that is never timed here (its
    tier's timings mean nothing on this device), the checked run is the profiled one: a third run of
    Triton's CPU interpreter would cost as much as the check. The call's own errors propagate."""
    outs, trace = trace_call(pass_.run, device)
    return outs, count(trace, device.type)


def profile_pass(pass_: Pass, device: torch.device, trace_path: Path | None = None) -> Profile:
    """One more run of a checked pass under the profiler: the forward for fwd, the backward alone for bwd
    (its forward runs first, outside the profile), both for fwd_bwd. A failure costs only the count."""
    try:
        pass_.setup()
        _, trace = trace_call(pass_.run, device, trace_path)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - profiling never costs the measurement
        text = str(exc).strip().splitlines()
        return Profile(None, f"profiling failed: {type(exc).__name__}: {text[0] if text else ''}"[:300])
    finally:
        pass_.release()
    return count(trace, device.type)


# -- the run's side file -----------------------------------------------------------------------------


class LaunchLog(JsonLines):
    """Appends, per profiled measurement, what it launched to the run's launches.jsonl (the last line of a
    (case, provider) wins: a resumed run may have profiled it again)."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(Path(run_dir) / LAUNCHES_FILE)

    def append(self, run_id: str, case_id: str, provider: str, profile: Profile) -> None:
        entry = {
            "run_id": run_id,
            "case_id": case_id,
            "provider": provider,
            "counted": profile.counted,
            "launches": profile.launches,
            "reason": profile.reason,
            "kernels": [asdict(k) for k in profile.kernels],
        }
        self.append_line(json.dumps(entry, separators=(",", ":"), allow_nan=False))
