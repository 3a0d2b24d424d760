"""The checker: right results pass, wrong ones fail with a reason, NaN and shape errors never pass."""

from __future__ import annotations

import torch

from tierbench.suite.checking import TOLERANCE, check


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
