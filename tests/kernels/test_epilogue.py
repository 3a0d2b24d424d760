"""matmul_bias_gelu: gelu(a @ b + bias) in one kernel, both GELU forms, and its backward, against float64.

Inputs are scaled like the suite's (outputs O(1)), so the pre-activations sit where GELU bends. Every result
is checked by the suite's relative norm and by an elementwise bound (matmul_checks.py); the gradients' bounds
carry the error of the kernel's stored pre-activation and of dz, both rounded to the input dtype.
"""

import importlib

import pytest
import torch
import torch.nn.functional as F
from build_script import run_build_script
from gpu_marks import on_hopper
from matmul_checks import FP32_ACCUMULATION_PER_TERM, assert_elementwise, product_bound
from reference_precision import exact_matmul, high

from tierbench.kernels import matmul_bias_gelu
from tierbench.kernels._common import _LAST_LAUNCH, last_launch
from tierbench.suite.measure.checking import TOLERANCE

ep = importlib.import_module("tierbench.kernels.epilogue")
mm = importlib.import_module("tierbench.kernels.matmul")
ws = importlib.import_module("tierbench.kernels._matmul_hopper_ws")
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

MAX_GELU_SLOPE = 1.13  # max |gelu'| (about 1.129, both forms)


def _inputs(m, n, k, dtype, device, seed=0, bias=True, grad=False):
    g = torch.Generator().manual_seed(seed)
    scale = max(k, 1) ** -0.25
    a = (torch.randn(m, k, generator=g) * scale).to(device=device, dtype=dtype)
    b = (torch.randn(k, n, generator=g) * scale).to(device=device, dtype=dtype)
    c = (torch.randn(n, generator=g) * 0.5).to(device=device, dtype=dtype) if bias else None
    dy = torch.randn(m, n, generator=g).to(device=device, dtype=dtype)
    leaves = [a, b] + ([c] if bias else [])
    for t in leaves:
        t.requires_grad_(grad)
    return a, b, c, dy


def _reference(a, b, bias, dy, approximate):
    """Float64 (float32 on a GPU) autograd of the unfused op: y, z, and the grads of a, b, bias."""
    a64, b64 = (high(t.detach()).requires_grad_() for t in (a, b))
    bias64 = None if bias is None else high(bias.detach()).requires_grad_()
    z = exact_matmul(a64, b64) + (0 if bias64 is None else bias64)
    y = F.gelu(z, approximate=approximate)
    y.backward(high(dy))
    return y.detach(), z.detach(), a64.grad, b64.grad, None if bias64 is None else bias64.grad


def _z_scale(a, b, bias):
    """sum_k |a_ik b_kj| + |bias_j|: the magnitude the pre-activation's error is measured against."""
    s = exact_matmul(a.detach().abs(), b.detach().abs())
    return s if bias is None else s + high(bias.detach()).abs()


def check_forward(y, z, a, b, bias, y_ref, z_ref, dtype, assert_close, what):
    k = a.shape[1]
    acc = (k + 2) * FP32_ACCUMULATION_PER_TERM * _z_scale(a, b, bias)  # accumulation, the GELU's own rounding
    assert_close(y, y_ref, dtype, f"{what} y")
    assert_elementwise(y, y_ref, TOLERANCE[dtype] * y_ref.abs() + MAX_GELU_SLOPE * acc, f"{what} y")
    if z is not None:
        assert_close(z, z_ref, dtype, f"{what} z")
        assert_elementwise(z, z_ref, TOLERANCE[dtype] * z_ref.abs() + acc, f"{what} z")


def _gelu_grad(z, approximate):
    x = z.detach().clone().requires_grad_()
    (g,) = torch.autograd.grad(F.gelu(x, approximate=approximate).sum(), x)
    return g


def check_backward(a, b, bias, dy, refs, approximate, dtype, assert_close, what):
    """dA, dB, dbias. The kernel's dz = dy * gelu'(z~) uses z~ = z rounded to dtype (|gelu''| <= 0.8) and is
    itself rounded: it is off by at most E = tol |dy| (|z| + |gelu'(z)|) + |dy| K 2^-22 S_z elementwise."""
    _, z_ref, da_ref, db_ref, dbias_ref = refs
    tol = TOLERANCE[dtype]
    m, k = a.shape
    grad = _gelu_grad(z_ref, approximate)
    dz_ref = high(dy) * grad
    dy_abs = high(dy).abs()
    err = tol * dy_abs * (z_ref.abs() + grad.abs()) + dy_abs * k * FP32_ACCUMULATION_PER_TERM * _z_scale(a, b, bias)
    a_, b_ = a.detach(), b.detach()
    if a.grad is not None:
        assert_close(a.grad, da_ref, dtype, f"{what} dA")
        assert_elementwise(a.grad, da_ref, product_bound(dz_ref, b_.T, da_ref, dtype, a_err=err), f"{what} dA")
    if b.grad is not None:
        assert_close(b.grad, db_ref, dtype, f"{what} dB")
        assert_elementwise(b.grad, db_ref, product_bound(a_.T, dz_ref, db_ref, dtype, b_err=err), f"{what} dB")
    if bias is not None and bias.grad is not None:
        assert_close(bias.grad, dbias_ref, dtype, f"{what} dbias")
        bound = err.sum(0) + tol * dbias_ref.abs() + m * FP32_ACCUMULATION_PER_TERM * dz_ref.abs().sum(0)
        assert_elementwise(bias.grad, dbias_ref, bound, f"{what} dbias")


SHAPES = [
    (37, 45, 23, "ptr"),  # odd K and N: the pointer kernel's epilogue
    (64, 48, 40, "tma"),  # several tiles per persistent program, ragged K
    (40, 24, 8, "tma"),  # ragged M and N edges: the bias load is masked, TMA clips the stores
]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k,path", SHAPES)
def test_matmul_bias_gelu(m, n, k, path, dtype, approximate, device, assert_close):
    a, b, bias, dy = _inputs(m, n, k, dtype, device)
    y_ref, z_ref, *_ = _reference(a, b, bias, dy, approximate)
    y = matmul_bias_gelu(a, b, bias, approximate)
    assert last_launch("matmul-epilogue").startswith(f"{path}:")  # no grad: z not stored
    check_forward(y, None, a, b, bias, y_ref, z_ref, dtype, assert_close, f"{m}x{n}x{k} {approximate}")


# The exact form's polynomial in x^2 overflows to -inf at |x| = 1e4 by design (its exp2 then gives 0 or inf).
@pytest.mark.filterwarnings("ignore:overflow encountered in multiply:RuntimeWarning")
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_tails_saturate_without_nan(approximate, device):
    # Pre-activations far in both tails (a bias of +-1e4, +-60): the exp inside each form overflows or
    # underflows there, and the GELU must still give z on the right and 0 on the left, its gradient 1 and 0.
    m, n, k = 8, 16, 8
    a = torch.zeros(m, k, device=device, dtype=torch.float32, requires_grad=True)
    b = torch.zeros(k, n, device=device, dtype=torch.float32, requires_grad=True)
    big = torch.tensor([1e4, -1e4, 60.0, -60.0] * (n // 4), device=device)
    bias = big.clone().requires_grad_()
    y = matmul_bias_gelu(a, b, bias, approximate)
    assert last_launch("matmul-epilogue").startswith(("tma", "ptr"))  # the Triton kernel, not a fallback
    assert torch.isfinite(y).all()
    right = big > 0
    assert torch.equal(y[:, right], big[right].expand(m, -1)) and torch.equal(
        y[:, ~right].abs(), torch.zeros_like(y[:, ~right])
    )
    y.backward(torch.ones_like(y))
    assert torch.isfinite(bias.grad).all()
    assert torch.equal(bias.grad, torch.where(right, float(m), 0.0).to(bias.grad))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k,path", SHAPES[:2])
def test_matmul_bias_gelu_backward(m, n, k, path, dtype, approximate, device, assert_close):
    a, b, bias, dy = _inputs(m, n, k, dtype, device, seed=1, grad=True)
    refs = _reference(a, b, bias, dy, approximate)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = matmul_bias_gelu(a, b, bias, approximate)
    assert last_launch("matmul-epilogue").startswith(f"{path} keep-z:")
    assert len(saved) == 3  # z, a, b
    what = f"{m}x{n}x{k} {approximate} {path}"
    check_forward(y, saved[0], a, b, bias, refs[0], refs[1], dtype, assert_close, what)
    y.backward(dy)
    assert last_launch("matmul-epilogue-bwd").startswith("gelu-backward:")
    assert last_launch("matmul-bwd").startswith(f"{path} dB:")
    check_backward(a, b, bias, dy, refs, approximate, dtype, assert_close, what)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("path", ["tma", "ptr"])
def test_forced_paths_and_configs(path, approximate, device, assert_close):
    """Both kernels, with and without the half-width epilogue stores, the pre-activation stored or not."""
    dtype = torch.bfloat16
    a, b, bias, dy = _inputs(96, 80, 64, dtype, device, seed=2)
    y_ref, z_ref, *_ = _reference(a, b, bias, dy, approximate)
    act = ep.activations.GELU_CODES[approximate]
    for cfg in (mm._cfg(16, 32, 16, 4, 2, group_m=3, subtile=False), mm._cfg(32, 32, 32, 4, 2, subtile=True)):
        for keep in (False, True):
            y, z = ep._forward(a, b, bias, act, keep, path=path, config=cfg)
            assert (z is not None) == keep
            check_forward(y, z, a, b, bias, y_ref, z_ref, dtype, assert_close, f"{path} {cfg} keep {keep}")


def test_grads_of_some_inputs(device, assert_close):
    dtype = torch.float16
    # Only the bias: dz and dbias, no matmul, and neither operand saved.
    a, b, bias, dy = _inputs(64, 48, 32, dtype, device, seed=3)
    bias.requires_grad_()
    refs = _reference(a, b, bias, dy, "none")
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = matmul_bias_gelu(a, b, bias)
    assert [t.shape for t in saved] == [(64, 48)]
    _LAST_LAUNCH.pop("matmul-bwd", None)
    y.backward(dy)
    assert last_launch("matmul-bwd") is None
    check_backward(a, b, bias, dy, refs, "none", dtype, assert_close, "bias only")
    # No bias, the gradient of b only (and the tanh form), dy arriving transposed (a column-major view).
    a, b, _, dy = _inputs(64, 48, 32, dtype, device, seed=4, bias=False)
    b.requires_grad_()
    dy = dy.T.contiguous().T
    refs = _reference(a, b, None, dy, "tanh")
    matmul_bias_gelu(a, b, None, approximate="tanh").backward(dy)
    assert last_launch("matmul-bwd").startswith("tma dB:")
    check_backward(a, b, None, dy, refs, "tanh", dtype, assert_close, "b only tanh")


def test_no_grad_saves_nothing(device):
    a, b, bias, _ = _inputs(32, 32, 32, torch.bfloat16, device, seed=5, grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        with torch.no_grad():
            assert matmul_bias_gelu(a, b, bias).grad_fn is None
        assert matmul_bias_gelu(a.detach(), b.detach(), bias.detach()).grad_fn is None
    assert saved == []
    assert last_launch("matmul-epilogue").startswith("tma:")


def test_empty_k_and_empty_output(device, assert_close):
    a, b, bias, dy = _inputs(5, 16, 0, torch.float32, device, seed=6, grad=True)
    y = matmul_bias_gelu(a, b, bias)  # gelu(bias) on every row
    assert_close(y, F.gelu(high(bias.detach())).expand(5, 16), torch.float32, "K = 0")
    y.backward(dy)
    assert_close(bias.grad, (high(dy) * _gelu_grad(high(bias.detach()), "none")).sum(0), torch.float32, "K = 0 dbias")
    a, b, bias, _ = _inputs(0, 16, 8, torch.float32, device, grad=True)
    y = matmul_bias_gelu(a, b, bias)
    assert y.shape == (0, 16)
    y.sum().backward()
    assert torch.equal(bias.grad, torch.zeros(16, device=device))


def test_validation(device, wrong_device):
    a, b, bias, _ = _inputs(4, 8, 6, torch.float16, device)
    with pytest.raises(TypeError, match=r"matmul_bias_gelu: b must have the dtype of a \(torch.float16\)"):
        matmul_bias_gelu(a, b.float(), bias)
    with pytest.raises(ValueError, match=r"matmul_bias_gelu: b must have shape \(K, N\) with K = a.shape\[1\] = 6"):
        matmul_bias_gelu(a, b.T, bias)
    with pytest.raises(TypeError, match=r"matmul_bias_gelu: bias must be a torch.Tensor, got float"):
        matmul_bias_gelu(a, b, 1.0)
    with pytest.raises(TypeError, match=r"matmul_bias_gelu: bias must have dtype in \(float16\), got torch.float32"):
        matmul_bias_gelu(a, b, bias.float())
    with pytest.raises(ValueError, match=r"matmul_bias_gelu: bias must have shape \(N,\) = \(8,\), got shape \(1, 8\)"):
        matmul_bias_gelu(a, b, bias[None])
    with pytest.raises(ValueError, match=r"matmul_bias_gelu: bias must be contiguous, got stride 2"):
        matmul_bias_gelu(a, b, torch.randn(16, dtype=torch.float16).to(device)[::2])
    with pytest.raises(ValueError, match=r"matmul_bias_gelu: approximate must be 'none' or 'tanh', got 'erf'"):
        matmul_bias_gelu(a, b, bias, approximate="erf")
    with pytest.raises(ValueError, match=r"matmul_bias_gelu: bias must be .*device meta|bias must be a CUDA tensor"):
        matmul_bias_gelu(a, b, bias.to(wrong_device))


def test_matmul_family_compiles_for_sm90_without_spills():
    # The interpreter runs the kernels' logic, never their build nor the activations' inline PTX: compile the
    # GPU builds ahead of time (no GPU needed) in a fresh process without the interpreter.
    builds = run_build_script("matmul_builds.py")
    assert len(builds) == 21
    for build, got in builds.items():
        assert got["registers"] is not None, f"{build}: {got}"
        if "keep-z" in build and build.startswith("ws"):
            # Keeping the pre-activation holds it beside the GELU's temporaries in the MMA warpgroups' 240
            # registers: 20 bytes a thread spill (only under autograd), left as measured against.
            assert got["spill_bytes"] <= 64, f"{build}: {got}"
        elif build == "fp8 gluon precise":
            # Three 64-register tiles a thread (the fp32 sum and two partials) leave 63 of 255 for the rest:
            # ptxas spills about 330 bytes (stores and loads), 15 of each in a K trip of 640 instructions.
            assert got["spill_bytes"] <= 400, f"{build}: {got}"
        else:
            assert got["spill_bytes"] == 0, f"{build}: {got}"
    for build in ("ws plain", "ws bias+gelu-tanh", "ws bias+gelu keep-z, both operands transposed"):
        got = builds[build]
        # Each MMA warpgroup keeps one wgmma in flight across its wait in the K loop, ptxas serialises none,
        # and the partitions get the registers the kernel asks for.
        assert not got["serialized"] and got["one_in_flight_waits"] == ws.MMA_WARPGROUPS, f"{build}: {got}"
        assert ws.MMA_REGS in got["partition_registers"] and ws.LOADER_REGS in got["partition_registers"], got
    # The Gluon FP8 kernel: precise accumulation adds each step's partial while the next step's products run
    # (three of a trip's four waits leave one group in flight; the trip's last waits for all), fast keeps one
    # step in flight; ptxas neither serialises nor adds waits.
    precise, fast = builds["fp8 gluon precise"], builds["fp8 gluon fast"]
    assert not precise["serialized"] and not fast["serialized"], (precise, fast)
    assert precise["loop_waits"] == ["0x1"] * 3 + ["0x0"] and precise["loop_mmas"] == 16, precise
    assert fast["loop_waits"] == ["0x1"] and fast["loop_mmas"] == 4, fast


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 14336, 4096)])
def test_matmul_bias_gelu_gpu_full_size(m, n, k, approximate, assert_close):
    dtype = torch.bfloat16
    a, b, bias, dy = _inputs(m, n, k, dtype, "cuda", seed=7, grad=True)
    refs = _reference(a, b, bias, dy, approximate)
    y = matmul_bias_gelu(a, b, bias, approximate)
    assert last_launch("matmul-epilogue").startswith("tma keep-z:")
    check_forward(y, None, a, b, bias, refs[0], refs[1], dtype, assert_close, f"{m}x{n}x{k} {approximate}")
    y.backward(dy)
    check_backward(a, b, bias, dy, refs, approximate, dtype, assert_close, f"{m}x{n}x{k} {approximate}")


@pytest.mark.gpu
@on_hopper
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize(
    "m,n,k,bias,keep_z,transposed",
    [
        (4096, 4096, 4096, True, False, False),
        (4000, 4040, 4104, True, True, False),  # ragged edges; the pre-activation kept as under autograd
        (16384, 14336, 4096, False, True, True),  # no bias, both operands column-major
        (200, 136, 72, True, False, False),
    ],
)
def test_matmul_bias_gelu_warp_specialised_gpu(m, n, k, bias, keep_z, transposed, approximate, assert_close):
    """The Gluon kernel's epilogue (path "ws"): y and the kept z against float32, every element in its bound."""
    dtype = torch.bfloat16
    a, b, c, dy = _inputs(m, n, k, dtype, "cuda", seed=9, bias=bias)
    if transposed:
        a, b = a.t().contiguous().t(), b.t().contiguous().t()
    y_ref, z_ref = _reference(a, b, c, dy, approximate)[:2]
    y, z = ep._forward(a, b, c, ep.activations.GELU_CODES[approximate], keep_z, path="ws")
    assert last_launch("matmul-epilogue").startswith("ws")
    check_forward(y, z, a, b, c, y_ref, z_ref, dtype, assert_close, f"ws {m}x{n}x{k} {approximate}")
