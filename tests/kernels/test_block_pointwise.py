"""SwiGLU, the residual add and the fused residual add + RMSNorm: forward and backward against float64, at odd
sizes, in both half dtypes and fp32; bad inputs refused by name."""

import pytest
import torch
from grad_checks import assert_grad_close

from tierbench.kernels import add_rms_norm, residual_add, swiglu
from tierbench.suite.measure.checking import ELEMENT_TOLERANCE, TOLERANCE, element_error
from tierbench.suite.ops.norm import RMS_NORM_EPS, add_rms_norm_ref
from tierbench.suite.ops.pointwise import residual_add_ref, swiglu_ref

DTYPES = [torch.float16, torch.bfloat16, torch.float32]


def _rand(shape, dtype, device, gen, scale=1.0):
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).to(device=device, dtype=dtype)


def _assert_out(out, ref, dtype, what):
    assert out.dtype == dtype and out.shape == ref.shape, what
    ref = ref.detach().to(device=out.device, dtype=torch.float64)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err <= TOLERANCE[dtype], f"{what}: relative error {err:.2e}"
    assert element_error(out.double(), ref) <= ELEMENT_TOLERANCE[dtype], what


def _hi(t):
    return t.detach().double().cpu().requires_grad_()


@pytest.mark.parametrize("dtype", DTYPES)
def test_swiglu_forward_and_backward(dtype, device):
    # 7 rows of 2 x 1337: one whole 1024-wide tile and a ragged one per half.
    gen = torch.Generator().manual_seed(0)
    x = _rand((7, 2 * 1337), dtype, device, gen, scale=2.0).requires_grad_()
    dy = _rand((7, 1337), dtype, device, gen)
    out = swiglu(x)
    (dx,) = torch.autograd.grad(out, [x], dy)
    xr = _hi(x)
    ref = swiglu_ref(xr)
    (dxr,) = torch.autograd.grad(ref, [xr], dy.double().cpu())
    _assert_out(out, ref, dtype, "swiglu")
    assert_grad_close(dx, dxr, dtype, "swiglu dx")


@pytest.mark.parametrize("dtype", DTYPES)
def test_residual_add_forward_and_backward(dtype, device):
    gen = torch.Generator().manual_seed(1)
    x, r = (_rand((5, 333), dtype, device, gen).requires_grad_() for _ in range(2))
    dy = _rand((5, 333), dtype, device, gen)
    out = residual_add(x, r)
    dx, dr = torch.autograd.grad(out, [x, r], dy)
    _assert_out(out, residual_add_ref(x.detach(), r.detach()).cpu(), dtype, "residual_add")
    assert torch.equal(dx, dy) and torch.equal(dr, dy)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hidden", [333, 4099])  # one ragged chunk; two chunks of the 4096-wide walk, one ragged
def test_add_rms_norm_both_outputs_and_every_gradient(dtype, hidden, device):
    gen = torch.Generator().manual_seed(2)
    x = _rand((6, hidden), dtype, device, gen, scale=0.5).requires_grad_()
    r = _rand((6, hidden), dtype, device, gen, scale=2.0).requires_grad_()
    w = (_rand((hidden,), dtype, device, gen, scale=0.2) + 1).requires_grad_()
    dy, dsum = _rand((6, hidden), dtype, device, gen), _rand((6, hidden), dtype, device, gen)
    out, total = add_rms_norm(x, r, w, RMS_NORM_EPS)
    grads = torch.autograd.grad((out, total), [x, r, w], (dy, dsum))
    leaves = [_hi(t) for t in (x, r, w)]
    ref_out, ref_total = add_rms_norm_ref(*leaves, RMS_NORM_EPS)
    refs = torch.autograd.grad((ref_out, ref_total), leaves, (dy.double().cpu(), dsum.double().cpu()))
    _assert_out(out, ref_out, dtype, "add_rms_norm out")
    _assert_out(total, ref_total, dtype, "add_rms_norm residual_out")
    for name, g, ref in zip(("dx", "dresidual", "dweight"), grads, refs):
        assert_grad_close(g, ref, dtype, f"add_rms_norm {name}")


def test_add_rms_norm_gradient_when_only_the_sum_is_used(device):
    gen = torch.Generator().manual_seed(3)
    x, r = (_rand((3, 40), torch.float32, device, gen).requires_grad_() for _ in range(2))
    w = _rand((40,), torch.float32, device, gen).requires_grad_()
    _, total = add_rms_norm(x, r, w)
    dsum = _rand((3, 40), torch.float32, device, gen)
    dx, dr, dw = torch.autograd.grad(total, [x, r, w], dsum, allow_unused=True)
    assert torch.equal(dx, dsum) and torch.equal(dr, dsum) and not dw.any()


def test_the_kernels_refuse_bad_inputs_by_name(device, wrong_device):
    x = torch.randn(4, 6, device=device)
    with pytest.raises(ValueError, match="swiglu: x must have an even"):
        swiglu(torch.randn(4, 5, device=device))
    with pytest.raises(ValueError, match="swiglu: x must be 2-D"):
        swiglu(torch.randn(2, 4, 6, device=device))
    with pytest.raises(ValueError, match="residual must have x's shape"):
        residual_add(x, torch.randn(4, 7, device=device))
    with pytest.raises(ValueError, match="residual_add: x must be contiguous"):
        residual_add(x.t(), x.t().contiguous())
    with pytest.raises(TypeError, match="add_rms_norm: residual must have dtype"):
        add_rms_norm(x, x.half(), torch.ones(6, device=device))
    with pytest.raises(ValueError, match="add_rms_norm: weight must be contiguous of shape"):
        add_rms_norm(x, x, torch.ones(5, device=device))
    with pytest.raises(ValueError, match="device"):
        swiglu(torch.randn(4, 6, device=wrong_device))
