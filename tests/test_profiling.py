"""What each call launched: counted from the profiler's trace, outside the timed rounds, kept in the records."""

from __future__ import annotations

import json

import pytest
import torch
from cpu_run import cpu_context

from tierbench.suite.catalog import build
from tierbench.suite.measure import profiling
from tierbench.suite.measure.plan import PlannedCase
from tierbench.suite.measure.runner import RunContext, measure_case, run_plan
from tierbench.suite.ops import matmul, norm
from tierbench.suite.providers.base import Provider
from tierbench.suite.store.reading import read_launches, read_records
from tierbench.suite.store.records import Measurement

CATALOG = build(entry_points=False)


def _ctx(tmp_path, **kw) -> RunContext:
    return cpu_context(tmp_path, **kw)


def _builtin(op: str, *names: str) -> list[Provider]:
    found = {p.name: p for p in CATALOG.providers() if p.op == op}
    return [found[n] for n in names]


def _event(name: str, ts: float, dur: float, cat: str = "cpu_op", tid: int = 1) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid, "ts": ts, "dur": dur, "args": {}}


@pytest.mark.parametrize("mode, eager_launches", [("fwd", 3), ("bwd", 3)])
def test_eager_formula_of_three_ops_launches_three_and_the_fused_kernel_one(tmp_path, mode, eager_launches):
    case = norm.make_case("bias_gelu_layer_norm", 8, 32, "bf16", mode)
    providers = _builtin("bias_gelu_layer_norm", "eager", "triton")
    profiles: dict = {}
    records = {
        r.provider: r for r in measure_case(case, providers, _ctx(tmp_path), norm.BIAS_GELU_LAYER_NORM, profiles)
    }
    eager = records["eager"]
    assert eager.status == "ok" and eager.launches == eager_launches and eager.launches_reason == ""
    names = [k.name for k in profiles[eager.key].kernels]
    if mode == "fwd":
        assert names == ["aten::add", "aten::gelu", "aten::layer_norm"]
    else:  # the backward alone: LayerNorm's, GELU's and the bias gradient's reduction; no forward op
        assert names == ["aten::native_layer_norm_backward", "aten::gelu_backward", "aten::sum"]
    # The triton tier is checked through the interpreter, not timed; its kernel launches are counted all the same.
    triton = records["triton"]
    kernels = profiles[triton.key].kernels
    assert triton.status == "skipped" and triton.launches == len(kernels)
    assert {k.kind for k in kernels} == {"triton kernel"}
    if mode == "fwd":  # one fused kernel
        assert triton.launches == 1
    else:  # one fused backward kernel, then the parameter gradients' partial sums reduced
        assert [k.name for k in kernels if "bwd" in k.name] == [kernels[0].name]
        assert all("partials" in k.name for k in kernels[1:])


def test_a_single_op_provider_launches_one_and_every_record_has_a_count_or_a_reason(tmp_path):
    case = norm.make_case("layer_norm", 8, 32, "bf16", "fwd")
    providers = _builtin("layer_norm", "eager", "triton", "quack")
    records = list(measure_case(case, providers, _ctx(tmp_path), norm.LAYER_NORM))
    by_name = {r.provider: r for r in records}
    assert by_name["eager"].launches == 1 and by_name["triton"].launches == 1
    assert all((r.launches is not None) != bool(r.launches_reason) for r in records), [
        (r.provider, r.launches, r.launches_reason) for r in records
    ]
    assert by_name["quack"].status == "skipped" and by_name["quack"].launches_reason == profiling.NOT_PROFILED


def test_the_profiler_is_never_active_while_the_timer_runs(tmp_path):
    seen: list[tuple[bool, bool]] = []  # (timer running, profiler active) at each call of the provider
    timing = {"on": False}

    def prepare(inputs, options, case):
        a, b = inputs["a"], inputs["b"]

        def call():
            seen.append((timing["on"], torch.autograd.profiler._is_profiler_enabled))
            return a @ b

        return call

    ctx = _ctx(tmp_path)
    measure = ctx.timer.measure

    def timed(fns, *watch):
        timing["on"] = True
        try:
            return measure(fns, *watch)
        finally:
            timing["on"] = False

    ctx.timer.measure = timed
    case = matmul.make_case(16, 8, 4, "fp32", "fwd", "16x8x4")
    (record,) = measure_case(case, [Provider("mine", "vendor", "matmul", prepare)], ctx, matmul.OP)
    assert record.status == "ok" and record.launches == 1
    profiled = [i for i, (_, active) in enumerate(seen) if active]
    first_timed = next(i for i, (on, _) in enumerate(seen) if on)
    assert len(profiled) == 1 and profiled[0] < first_timed  # one profiled call, before the timing rounds
    assert not any(on and active for on, active in seen) and len(seen) > first_timed + 4


def test_a_profiling_failure_costs_only_the_count(tmp_path):
    def prepare(inputs, options, case):
        a, b = inputs["a"], inputs["b"]

        def call():
            if torch.autograd.profiler._is_profiler_enabled:
                raise RuntimeError("not under a profiler")
            return a @ b

        return call

    case = matmul.make_case(16, 8, 4, "fp32", "fwd", "16x8x4")
    (record,) = measure_case(case, [Provider("shy", "vendor", "matmul", prepare)], _ctx(tmp_path), matmul.OP)
    assert record.status == "ok" and record.median_ms > 0
    assert record.launches is None and record.launches_reason == "profiling failed: RuntimeError: not under a profiler"


def test_run_plan_appends_each_launch_list_beside_its_record(tmp_path):
    case = norm.make_case("bias_gelu_layer_norm", 8, 32, "bf16", "fwd")
    plan = [PlannedCase(case, norm.BIAS_GELU_LAYER_NORM, tuple(_builtin("bias_gelu_layer_norm", "eager")))]
    (tmp_path / profiling.LAUNCHES_FILE).write_text('{"case_id": "x", "provi')  # a kill in mid-write
    with pytest.warns(UserWarning, match="cut a truncated last record"):
        run_plan(plan, _ctx(tmp_path))
    lines = (tmp_path / profiling.LAUNCHES_FILE).read_text().splitlines()
    assert len(lines) == 1  # the half-written line was cut before appending
    logged = read_launches(tmp_path)[(case.case_id, "eager")]
    (record,) = read_records(tmp_path)
    assert logged["launches"] == record.launches == 3 and logged["run_id"] == "t"
    assert [k["name"] for k in logged["kernels"]] == ["aten::add", "aten::gelu", "aten::layer_norm"]
    assert all(k["us"] > 0 and k["kind"] == "operator" for k in logged["kernels"])
    assert logged["counted"] == profiling.CPU_COUNTED


def test_new_fields_read_back_and_are_typed():
    base = dict(
        run_id="r", op="m", family="m", case={}, case_id="m/x", label="x", x=1.0, provider="p", tier="t", status="ok"
    )
    r = Measurement(**base, launches=3, traffic_bytes=3.0e6)
    again = Measurement.from_dict(json.loads(r.to_json()))
    assert again.launches == 3 and again.traffic_bytes == 3.0e6 and again.launches_reason == ""
    with pytest.raises(TypeError, match="launches"):
        Measurement(**base, launches=2.5)
    with pytest.raises(TypeError, match="launches"):
        Measurement(**base, launches=True)
    old = {k: v for k, v in json.loads(r.to_json()).items() if k not in ("launches", "launches_reason")}
    assert Measurement.from_dict(old).launches is None  # records from before the field still read


def test_device_trace_counts_kernels_memsets_and_memcpys_in_order():
    """A GPU trace as kineto writes it: host-side events (operators, runtime calls) are not launches."""
    trace = {
        "traceEvents": [
            _event("aten::layer_norm", 10.0, 50.0),
            _event("cudaLaunchKernel", 12.0, 3.0, cat="cuda_runtime"),
            _event("void at::native::vectorized_layer_norm_kernel<...>", 30.0, 8.5, cat="kernel", tid=7),
            _event("Memset (Device)", 20.0, 1.0, cat="gpu_memset", tid=7),
            _event("Memcpy DtoD (Device -> Device)", 40.0, 2.0, cat="gpu_memcpy", tid=7),
            {"ph": "f", "cat": "ac2g", "name": "flow", "ts": 12.0, "pid": 7, "tid": 1},
            {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
        ]
    }
    profile = profiling.count(trace, "cuda")
    assert profile.launches == 3 and profile.counted == profiling.GPU_COUNTED
    assert [(k.kind, k.us) for k in profile.kernels] == [("memset", 1.0), ("kernel", 8.5), ("memcpy", 2.0)]
    empty = profiling.count({"traceEvents": [_event("aten::add", 1.0, 2.0)]}, "cuda")
    assert empty.launches is None and "no device activity" in empty.reason


def test_cpu_trace_counts_outermost_computing_operators():
    trace = {
        "traceEvents": [
            _event("aten::reshape", 0.0, 10.0),  # pass-through: what it calls counts
            _event("aten::clone", 1.0, 8.0),
            _event("aten::copy_", 2.0, 5.0),
            _event("aten::empty", 11.0, 1.0),  # allocation: nothing
            _event("autograd::engine::evaluate_function: MulBackward0", 20.0, 10.0),
            _event("MulBackward0", 20.5, 9.0),
            _event("aten::mul", 21.0, 3.0),
            _event("aten::mul", 25.0, 3.0),
            _event("triton::_norm_kernel", 40.0, 30.0, cat="user_annotation"),
            _event("aten::copy_", 41.0, 1.0),  # the interpreter's own copies, inside the kernel's mark
            _event("aten::add", 5.0, 2.0, tid=2),  # another thread's outermost operator
        ]
    }
    profile = profiling.count(trace, "cpu")
    assert [k.name for k in profile.kernels] == ["aten::clone", "aten::add", "aten::mul", "aten::mul", "_norm_kernel"]
    assert profile.launches == 5 and profile.kernels[0].us == 8.0
    compiled = {"traceEvents": [_event("Torch-Compiled Region: 0/0", 0.0, 5.0), _event("aten::empty", 1.0, 1.0)]}
    assert profiling.count(compiled, "cpu").launches is None
    assert profiling.count(compiled, "cpu").reason == profiling.COMPILED_REASON
