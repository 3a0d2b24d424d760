"""The backward passes of the norms and attention on the CPU: every gradient checked, a wrong one caught,
the backward timed alone, and the FLOPs each SDPA backend executes kept beside the work model's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from cpu_run import cpu_context

from tierbench.suite.ceilings import Ceilings
from tierbench.suite.measure.runner import RunContext, measure_case
from tierbench.suite.ops import attention, norm
from tierbench.suite.providers.base import Provider
from tierbench.timing import TimingSettings

OPS = {op.name: op for op in (*norm.FAMILY.ops, *attention.FAMILY.ops)}


def _ctx(tmp_path) -> RunContext:
    ceilings = Ceilings(device_name="cpu", copy_gbps=10.0, matmul_tflops={"fp32": 0.1, "bf16": 0.1})
    return cpu_context(tmp_path, ceilings=ceilings)


def _measure(tmp_path, case, providers):
    return {r.provider: r for r in measure_case(case, providers, _ctx(tmp_path), OPS[case.op])}


def _vendor(providers, op: str) -> list[Provider]:
    return [p for p in providers(op) if p.tier == "vendor"]


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm", "bias_gelu_layer_norm"])
@pytest.mark.parametrize("mode", ["bwd", "fwd_bwd"])
def test_every_norm_gradient_is_checked_through_the_vendor_tier(tmp_path, providers, kind, mode):
    case = norm.make_case(kind, 24, 96, "fp32", mode)
    records = _measure(tmp_path, case, _vendor(providers, kind))
    r = records["eager"]
    grads = {f"d{name}" for name in OPS[kind].grads}
    assert r.status == "ok" and r.median_ms > 0, r.reason
    assert set(r.errors) == grads | ({"out"} if mode == "fwd_bwd" else set())
    assert max(r.errors.values()) < r.tolerance
    assert r.flops == OPS[kind].work(case).flops and r.mode == mode


def test_a_norm_with_a_wrong_weight_gradient_is_incorrect(tmp_path, providers):
    """The forward is right; the gradient reaching the weight is 1% too large."""

    def wrong_dweight(i, o, c):
        x, w, b = i["x"], i["weight"], i["bias"]
        return lambda: F.layer_norm(x, x.shape[-1:], w * 1.01 - w.detach() * 0.01, b, o["eps"])

    case = norm.make_case("layer_norm", 24, 96, "fp32", "bwd")
    wrong = Provider("wrong-dweight", "triton", "layer_norm", wrong_dweight)
    records = _measure(tmp_path, case, [*_vendor(providers, "layer_norm"), wrong])
    bad = records["wrong-dweight"]
    assert records["eager"].status == "ok"
    assert bad.status == "incorrect" and bad.reason.startswith("dweight: ") and bad.median_ms is None
    assert bad.errors["dx"] < 1e-6 and bad.errors["dbias"] < 1e-6 and bad.errors["dweight"] > 1e-3


@pytest.mark.parametrize("causal", [False, True])
def test_attention_gradients_are_checked_and_a_wrong_dv_is_incorrect(tmp_path, providers, causal):
    def wrong_dv(i, o, c):
        q, k, v = i["q"], i["k"], i["v"]
        return lambda: F.scaled_dot_product_attention(
            q, k, v * 1.01 - v.detach() * 0.01, is_causal=o["causal"], scale=o["scale"]
        )

    case = attention.make_case(1, 2, 64, 16, causal, "fp32", "bwd")
    wrong = Provider("wrong-dv", "triton", "attention", wrong_dv)
    sdpa = [providers("attention", "sdpa-math"), providers("attention", "sdpa-flash")]
    records = _measure(tmp_path, case, [*sdpa, wrong])
    for name in ("sdpa-math", "sdpa-flash"):
        r = records[name]
        assert r.status == "ok", r.reason
        assert set(r.errors) == {"dq", "dk", "dv"} and max(r.errors.values()) < r.tolerance
    bad = records["wrong-dv"]
    assert bad.status == "incorrect" and bad.reason.startswith("dv: ") and bad.errors["dv"] > 1e-3
    assert bad.errors["dq"] < 1e-5 and bad.errors["dk"] < 1e-5


@pytest.mark.parametrize("causal", [False, True])
def test_executed_flops_math_is_the_textbook_and_flash_recomputes(tmp_path, providers, causal):
    """The math backend: four backward products over the whole score matrix (masked afterwards); flash:
    five, skipping the masked half when causal. Both records keep the work model's count too."""
    product = 2.0 * 1 * 2 * 64 * 64 * 16
    half = product / 2 if causal else product
    expected = {
        ("bwd", "sdpa-math"): 4 * product,
        ("bwd", "sdpa-flash"): 5 * half,
        ("fwd_bwd", "sdpa-math"): 6 * product,
        ("fwd_bwd", "sdpa-flash"): 7 * half,
        ("fwd", "sdpa-math"): 2 * product,
        ("fwd", "sdpa-flash"): 2 * half,
    }
    for mode in ("fwd", "bwd", "fwd_bwd"):
        case = attention.make_case(1, 2, 64, 16, causal, "fp32", mode)
        model = OPS["attention"].work(case).flops
        records = _measure(tmp_path, case, [providers("attention", "sdpa-math"), providers("attention", "sdpa-flash")])
        for name in ("sdpa-math", "sdpa-flash"):
            r = records[name]
            assert r.status == "ok" and r.flops == model, r.reason
            assert r.executed_flops == expected[(mode, name)], (mode, name)
        assert records["sdpa-flash"].executed_flops == model  # flash executes what the model counts


def _gpu_ctx(tmp_path) -> RunContext:
    from tierbench.timing import CudaEventTimer

    device = torch.device("cuda")
    timer = CudaEventTimer(TimingSettings(warmup_ms=5, rep_ms=10, rounds=2, min_reps=3, max_reps=50), device)
    ceilings = Ceilings("gpu", 4000.0, {"bf16": 700.0})
    return RunContext("t", tmp_path, device, timer, ceilings, {"device_name": "gpu"})


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_attention_backward_every_provider_checked_graphed_and_math_holds_p(tmp_path, catalog, causal):
    """On a GPU: every attention provider's backward checked; SDPA's flash backward replayed from a CUDA
    graph; the math backend's backward needs more memory than flash's, and executes the textbook FLOPs."""
    case = attention.make_case(1, 16, 4096, 128, causal, "bf16", "bwd")
    chosen = [p for p in catalog.providers() if p.op == "attention"]
    records = {r.provider: r for r in measure_case(case, chosen, _gpu_ctx(tmp_path), OPS["attention"])}
    for r in records.values():
        assert r.status in ("ok", "skipped", "oom"), (r.provider, r.status, r.reason)
        if r.status == "ok":
            assert set(r.errors) == {"dq", "dk", "dv"} and r.rel_error <= r.tolerance
            assert r.executed_flops is None or r.executed_flops > 0
    flash, math = records["sdpa-flash"], records["sdpa-math"]
    assert flash.status == math.status == "ok"
    assert flash.timer == "cuda-events+graph", flash.timer
    assert math.peak_mem_bytes > 4 * flash.peak_mem_bytes
    assert math.executed_flops == 4 * 2.0 * 16 * 4096 * 4096 * 128
    assert records["triton"].status == "ok" and records["triton"].executed_flops == 3.5 * (
        OPS["attention"].work(attention.make_case(1, 16, 4096, 128, causal, "bf16", "fwd")).flops
    )


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm", "bias_gelu_layer_norm"])
def test_gpu_norm_backward_through_every_tier(tmp_path, catalog, kind):
    case = norm.make_case(kind, 16384, 4096, "bf16", "bwd")
    chosen = [p for p in catalog.providers() if p.op == kind]
    records = {r.provider: r for r in measure_case(case, chosen, _gpu_ctx(tmp_path), OPS[kind])}
    for name in ("eager", "compile", "triton"):
        r = records[name]
        assert r.status == "ok", (name, r.reason)
        assert set(r.errors) == {f"d{n}" for n in OPS[kind].grads} and r.timer.startswith("cuda-events")
    if "quack" in records:
        assert records["quack"].status in ("ok", "skipped"), records["quack"].reason


def test_the_triton_tier_states_what_its_attention_kernel_executes_as_attention_declares_it(providers):
    """Attention's module says its Triton backward runs seven products; the generic adapter only passes it on."""
    bwd = attention.make_case(1, 2, 64, 16, False, "bf16", "bwd")
    product = 2.0 * 1 * 2 * 64 * 64 * 16
    assert providers("attention", "triton").executed_flops(bwd) == 7 * product
    assert providers("attention", "triton").executed_flops(attention.make_case(1, 2, 64, 16, False, "bf16", "fwd")) == (
        2 * product
    )
    assert providers("rms_norm", "triton").executed_flops(norm.make_case("rms_norm", 24, 96, "fp32", "bwd")) is None
