"""The checker: right results pass, wrong ones fail with a reason, NaN and shape errors never pass."""

from __future__ import annotations

import torch

from tierbench.suite.measure.checking import TOLERANCE, check, check_all


def test_correct_low_precision_output_passes():
    ref = torch.randn(256, 256, dtype=torch.float64)
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        verdict = check(ref.to(dtype), ref, dtype)
        assert verdict.ok, verdict
        assert verdict.rel_error < TOLERANCE[dtype]


def test_wrong_output_fails_with_its_error():
    ref = torch.randn(128, 64, dtype=torch.float64)
    wrong = ref.clone()
    wrong[:, :8] = 0  # a kernel that skipped a tile
    verdict = check(wrong.to(torch.bfloat16), ref, torch.bfloat16)
    assert not verdict.ok and verdict.rel_error > 0.1
    assert "exceeds the bfloat16 tolerance" in verdict.reason


def test_nan_and_inf_fail_outright():
    ref = torch.randn(32, 32, dtype=torch.float64)
    out = ref.to(torch.float16)
    out[3, 4] = float("nan")
    verdict = check(out, ref, torch.float16)
    assert not verdict.ok and "NaN or Inf" in verdict.reason


def test_shape_mismatch_fails():
    ref = torch.randn(4, 8, dtype=torch.float64)
    verdict = check(ref.t().contiguous(), ref, torch.float32)
    assert not verdict.ok and "shape" in verdict.reason


def test_an_ops_own_gradient_bound_applies_to_its_gradients_only():
    """Attention's 16-bit gradients get a wider elementwise bound (ill-conditioned first causal rows); its
    forward output, and a gradient element of the size an unwritten one scores, still fail."""
    from tierbench.suite.ops.attention import GRADIENT_ELEMENT_TOLERANCE

    g = torch.Generator().manual_seed(3)
    ref = torch.randn(4096, generator=g, dtype=torch.float64)
    rms = float(ref.pow(2).mean().sqrt())
    off = ref.clone()
    off[7] += 0.15 * (rms + abs(float(ref[7])))  # 0.15 of (rms + |ref|): past 0.1, within attention's 0.25
    outs = {"out": ref.to(torch.bfloat16), "dq": off.to(torch.bfloat16)}
    refs = {"out": ref, "dq": ref}
    assert not check_all(outs, refs, torch.bfloat16).ok
    assert check_all(outs, refs, torch.bfloat16, gradient_element_tolerance=GRADIENT_ELEMENT_TOLERANCE).ok
    forward = check_all({**outs, "out": off.to(torch.bfloat16)}, refs, torch.bfloat16, None, GRADIENT_ELEMENT_TOLERANCE)
    assert not forward.ok and "out" in forward.reason
    unwritten = ref.clone()
    unwritten[7] = 0.0 if abs(float(ref[7])) > 0.5 * rms else 3 * rms  # an element that should not read so
    outs = {"out": ref.to(torch.bfloat16), "dq": unwritten.to(torch.bfloat16)}
    assert not check_all(outs, refs, torch.bfloat16, gradient_element_tolerance=GRADIENT_ELEMENT_TOLERANCE).ok
