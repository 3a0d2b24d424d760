"""matmul_fp8: scaled FP8 products against the float64 product of the dequantised operands; the layouts it
takes and the clear errors for those it does not.

Under the interpreter the kernel multiplies the fp8 values widened to fp32 (exact products), so scales,
accumulation, tile edges and layouts are what these tests check; the FP8 tensor-core path needs a GPU.
"""

import importlib

import pytest
import torch
from gpu_marks import on_hopper
from matmul_checks import assert_elementwise, product_bound
from reference_precision import exact_matmul, high

from tierbench.kernels import matmul_fp8
from tierbench.kernels._common import last_launch
from tierbench.suite.measure.checking import FP8_TOLERANCE, fp8_tolerance

f8 = importlib.import_module("tierbench.kernels.matmul_fp8")
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
FP8_MAX = {E4M3: 448.0, E5M2: 57344.0}
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# The FP8 tolerances are the project's (suite/measure/checking.py): against the dequantised product fp8_tolerance of
# the output dtype, end to end FP8_TOLERANCE per format.
# Accumulation term of the elementwise bound on a GPU, as a factor of sum_k |a b|: each BLOCK_K (128) step
# summed with ~14 bits kept before it joins the fp32 accumulator (not yet measured).
FP8_GPU_ACCUMULATION = 128 * 2.0**-14


def quantise(x: torch.Tensor, fmt: torch.dtype, dim: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """x = q * scale, scale = amax / fp8 max over the whole tensor (dim None) or along `dim` (kept)."""
    amax = x.abs().amax() if dim is None else x.abs().amax(dim, keepdim=True)
    scale = (amax / FP8_MAX[fmt]).float().clamp_min(1e-12)
    return (x / scale).to(fmt), scale


def fp8_operands(m, n, k, fmt, scaling, device, seed=0, k_stride=None):
    """a (M, K) row-major and b = bt.T, bt (N, K) row-major, quantised; scales per `scaling`: "tensor",
    "row-col" (per row of a, per column of b) or "row-tensor". Returns the unquantised operands too."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g).to(device) * 3.0
    yt = torch.randn(n, k, generator=g).to(device) * 0.1
    a, scale_a = quantise(x, fmt, None if scaling == "tensor" else 1)
    bt, scale_b = quantise(yt, fmt, None if scaling in ("tensor", "row-tensor") else 1)
    if k_stride is not None:  # rows padded to k_stride elements: K itself need not be a multiple of 16
        a = torch.zeros(m, k_stride, dtype=fmt, device=device)[:, :k].copy_(a)
        bt = torch.zeros(n, k_stride, dtype=fmt, device=device)[:, :k].copy_(bt)
    scale_b = scale_b.reshape(1, n) if scale_b.numel() > 1 else scale_b
    return a, bt.T, scale_a, scale_b, x, yt.T


def dequantised_product(a, b, scale_a, scale_b):
    return exact_matmul(high(a) * high(scale_a), high(b) * high(scale_b))


def check_fp8(out, a, b, scale_a, scale_b, out_dtype, what):
    ref = dequantised_product(a, b, scale_a, scale_b)
    assert out.dtype == out_dtype and out.shape == ref.shape, what
    err = ((high(out) - ref).norm() / ref.norm()).item()
    assert err <= fp8_tolerance(out_dtype), f"{what}: relative error {err:.2e} > {fp8_tolerance(out_dtype):.0e}"
    a_deq, b_deq = high(a) * high(scale_a), high(b) * high(scale_b)
    acc = None if out.device.type == "cpu" else FP8_GPU_ACCUMULATION
    assert_elementwise(out, ref, product_bound(a_deq, b_deq, ref, out_dtype, accumulation=acc), what)
    return err


@pytest.mark.parametrize("scaling", ["tensor", "row-col", "row-tensor"])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(
    "m,n,k",
    [
        (33, 48, 64),  # odd M: the last row tile clipped, per-row scales masked
        (40, 24, 80),  # N not a tile multiple, K a ragged last K tile (interpreter BLOCK_K 32)
        (96, 80, 48),  # several tiles per persistent program
    ],
)
def test_matmul_fp8(m, n, k, out_dtype, scaling, device):
    a, b, scale_a, scale_b, _, _ = fp8_operands(m, n, k, E4M3, scaling, device)
    out = matmul_fp8(a, b, scale_a, scale_b, out_dtype)
    assert last_launch("matmul-fp8").startswith("tma:")
    check_fp8(out, a, b, scale_a, scale_b, out_dtype, f"{m}x{n}x{k} {scaling} {out_dtype}")


@pytest.mark.parametrize("fmt", [E4M3, E5M2])
@pytest.mark.parametrize("scaling", ["tensor", "row-col"])
def test_quantisation_recipe_end_to_end(fmt, scaling, device):
    """The docstring's recipe (scale = amax / fp8 max) reproduces the unquantised product within the format's
    tolerance, and matches the dequantised product as closely as any other fp8 input."""
    a, b, scale_a, scale_b, x, y = fp8_operands(64, 48, 96, fmt, scaling, device, seed=1)
    out = matmul_fp8(a, b, scale_a, scale_b, torch.float32)
    check_fp8(out, a, b, scale_a, scale_b, torch.float32, f"{fmt} {scaling}")
    exact = exact_matmul(x, y)
    err = ((high(out) - exact).norm() / exact.norm()).item()
    assert err <= FP8_TOLERANCE[fmt], f"{fmt} {scaling}: {err:.2e} from the unquantised product"


def test_padded_rows_odd_k_and_fast_accum(device):
    """K = 40 (not a multiple of 16) with rows padded to 48 elements: TMA needs aligned strides, not K."""
    a, b, scale_a, scale_b, _, _ = fp8_operands(24, 32, 40, E4M3, "row-col", device, seed=2, k_stride=48)
    assert a.stride() == (48, 1) and b.stride() == (1, 48)
    out = matmul_fp8(a, b, scale_a, scale_b)
    check_fp8(out, a, b, scale_a, scale_b, torch.bfloat16, "padded rows")
    fast = matmul_fp8(a, b, scale_a, scale_b, fast_accum=True)
    assert last_launch("matmul-fp8").startswith("tma fast-accum:")
    check_fp8(fast, a, b, scale_a, scale_b, torch.bfloat16, "fast accum")


def test_forced_configs(device):
    a, b, scale_a, scale_b, _, _ = fp8_operands(72, 64, 96, E5M2, "row-col", device, seed=3)
    cfg = f8._cfg
    several = f8.fp8_cfg(16, 16, 32, 4, 2, per_sm=3)  # programs striding over tiles three SMs' worth apart
    for c in (cfg(16, 32, 32, 4, 2, group_m=3), cfg(32, 16, 64, 4, 2, subtile=True), several):
        out = f8._matmul_fp8_forward(a, b, scale_a, scale_b, torch.bfloat16, config=c)
        check_fp8(out, a, b, scale_a, scale_b, torch.bfloat16, f"{c}")


def test_split_products_ragged_and_scaled(device):
    """Precise accumulation as two half-width products a K step: each half's column scales and stores, a
    ragged last tile (N = 40 against 32-wide tiles of two 16-wide halves), every output dtype."""
    a, b, scale_a, scale_b, _, _ = fp8_operands(50, 40, 80, E4M3, "row-col", device, seed=4)
    split = f8.fp8_cfg(16, 32, 32, 4, 2, split_n=True)
    for out_dtype in f8.OUT_DTYPES:
        out = f8._matmul_fp8_forward(a, b, scale_a, scale_b, out_dtype, config=split)
        check_fp8(out, a, b, scale_a, scale_b, out_dtype, f"split halves {out_dtype}")
    a, b, scale_a, scale_b, _, _ = fp8_operands(33, 48, 64, E5M2, "tensor", device, seed=5)
    out = f8._matmul_fp8_forward(a, b, scale_a, scale_b, torch.bfloat16, config=split)
    check_fp8(out, a, b, scale_a, scale_b, torch.bfloat16, "split halves, per-tensor scales")


def test_empty(device):
    one = torch.ones((), device=device)
    a, b = torch.zeros(8, 0, dtype=E4M3, device=device), torch.zeros(16, 0, dtype=E4M3, device=device).T
    assert torch.equal(matmul_fp8(a, b, one, one), torch.zeros(8, 16, dtype=torch.bfloat16, device=device))
    a, b = torch.zeros(0, 32, dtype=E4M3, device=device), torch.zeros(16, 32, dtype=E4M3, device=device).T
    assert matmul_fp8(a, b, torch.ones(0, 1, device=device), one).shape == (0, 16)


def test_validation(device, wrong_device):
    a, b, sa, sb, _, _ = fp8_operands(8, 16, 32, E4M3, "row-col", device)
    one = torch.ones((), device=device)

    def raises(exc, pattern, *args, **kwargs):
        with pytest.raises(exc, match=pattern):
            matmul_fp8(*args, **kwargs)

    raises(TypeError, r"matmul_fp8: a must have dtype in \(float8_e4m3fn, float8_e5m2\), got torch.bfloat16",
           a.bfloat16(), b, sa, sb)  # fmt: skip
    raises(TypeError, r"matmul_fp8: b must have the dtype of a \(torch.float8_e4m3fn\)", a, b.to(E5M2), sa, sb)
    raises(ValueError, r"matmul_fp8: b must have shape \(K, N\) with K = a.shape\[1\] = 32", a, b.T, sa, sb)
    raises(ValueError, r"matmul_fp8: a must be 2-D \(M, K\)", a[None], b, sa, sb)
    # Layouts.
    raises(ValueError, r"matmul_fp8: b must be K-major: \(K, N\) with column-major storage, b = bt.T .* "
           r"got strides \(16, 1\)", a, b.contiguous(), sa, sb)  # fmt: skip
    raises(ValueError, r"matmul_fp8: a must be row-major \(M, K\) with a unit column stride, got strides \(1, 8\)",
           a.T.contiguous().T, b, sa, sb)  # fmt: skip
    a40, b40, *_ = fp8_operands(8, 16, 40, E4M3, "tensor", device)
    raises(ValueError, r"matmul_fp8: a's row stride must be a positive multiple of 16 elements \(TMA\), got 40",
           a40, b40, one, one)  # fmt: skip
    raises(ValueError, r"matmul_fp8: b's column stride must be a positive multiple of 16 elements \(TMA\), got 40",
           a, torch.zeros(16, 40, dtype=E4M3, device=device)[:, :32].T, one, one)  # fmt: skip
    shifted = torch.zeros(8 * 32 + 8, dtype=E4M3, device=device)[8:].view(8, 32)
    raises(ValueError, r"matmul_fp8: a must start at a 16-byte aligned address \(TMA\), got offset 8",
           shifted, b, one, one)  # fmt: skip
    a20, b20, *_ = fp8_operands(8, 20, 32, E4M3, "tensor", device)
    raises(ValueError, r"matmul_fp8: N = b.shape\[1\] must be a multiple of 8 for a torch.bfloat16 output .* got 20",
           a20, b20, one, one)  # fmt: skip
    assert matmul_fp8(a20, b20, one, one, torch.float32).shape == (8, 20)  # 80-byte rows: fine for fp32
    # Scales, output dtype, flags.
    raises(ValueError, r"matmul_fp8: scale_a must be a float32 tensor of one element \(per tensor\) or of shape "
           r"\(8, 1\) \(per row of a\), got shape \(8,\)", a, b, sa.reshape(8), sb)  # fmt: skip
    raises(ValueError, r"or of shape \(1, 16\) \(per column of b\), got shape \(16, 1\)", a, b, sa, sb.T)
    raises(
        TypeError, r"matmul_fp8: scale_b must have dtype in \(float32\), got torch.bfloat16", a, b, sa, sb.bfloat16()
    )
    raises(ValueError, r"matmul_fp8: scale_a must be .*device meta|scale_a must be a CUDA tensor",
           a, b, sa.to(wrong_device), sb)  # fmt: skip
    raises(TypeError, r"matmul_fp8: out_dtype must be one of \(bfloat16, float16, float32\), got torch.float8_e4m3fn",
           a, b, sa, sb, E4M3)  # fmt: skip
    raises(TypeError, r"matmul_fp8: fast_accum must be a bool, got int", a, b, sa, sb, fast_accum=1)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize(
    "out_dtype,fast_accum", [(torch.bfloat16, False), (torch.float32, False), (torch.bfloat16, True)]
)
@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 14336, 4096)])
def test_matmul_fp8_gpu_full_size(m, n, k, out_dtype, fast_accum):
    a, b, scale_a, scale_b, _, _ = fp8_operands(m, n, k, E4M3, "row-col", "cuda", seed=4)
    out = matmul_fp8(a, b, scale_a, scale_b, out_dtype, fast_accum=fast_accum)
    if fast_accum:  # the whole K in the tensor cores' accumulator: the norm only
        ref = dequantised_product(a, b, scale_a, scale_b)
        err = ((out.float() - ref).norm() / ref.norm()).item()
        assert err <= fp8_tolerance(out_dtype), f"fast accum {m}x{n}x{k}: {err:.2e}"
    else:
        check_fp8(out, a, b, scale_a, scale_b, out_dtype, f"{m}x{n}x{k} {out_dtype}")


def test_gluon_path_needs_a_hopper_gpu(device):
    # The Gluon kernel has no interpreter: forcing it elsewhere is refused with the reason, and a wrong path
    # names the valid ones.
    a, b, scale_a, scale_b, _, _ = fp8_operands(32, 32, 64, E4M3, "tensor", device, seed=9)
    if device == "cuda" and torch.cuda.get_device_capability() == (9, 0):
        pytest.skip("this GPU runs the Gluon kernel (test_gluon_fp8_gpu)")
    with pytest.raises(ValueError, match=r"matmul_fp8: path 'gluon' needs an sm_90 \(Hopper\) GPU"):
        matmul_fp8(a, b, scale_a, scale_b, path="gluon")
    with pytest.raises(ValueError, match=r"matmul_fp8: path must be 'triton', 'gluon' or None, got 'cuda'"):
        matmul_fp8(a, b, scale_a, scale_b, path="cuda")
    check_fp8(matmul_fp8(a, b, scale_a, scale_b, path="triton"), a, b, scale_a, scale_b, torch.bfloat16, "triton")


@pytest.mark.gpu
@on_hopper
@pytest.mark.parametrize(
    "m,n,k,scaling,k_stride",
    [
        (4096, 4096, 4096, "row-col", None),
        (8192, 8192, 8192, "tensor", None),  # many tiles a program: the ring runs ahead across tiles
        (1000, 1016, 1000, "row-col", 1008),  # ragged tiles; K neither a multiple of 128 nor of 4 K steps
        (300, 136, 200, "row-tensor", 208),  # fewer tiles than SMs, K under one trip (zero-filled steps)
        (16384, 14336, 4096, "row-col", None),
    ],
)
def test_gluon_fp8_gpu(m, n, k, scaling, k_stride):
    a, b, scale_a, scale_b, _, _ = fp8_operands(m, n, k, E4M3, scaling, "cuda", seed=m + k, k_stride=k_stride)
    for out_dtype in (torch.bfloat16, torch.float32):
        out = matmul_fp8(a, b, scale_a, scale_b, out_dtype, path="gluon")
        assert last_launch("matmul-fp8").startswith("gluon:")
        check_fp8(out, a, b, scale_a, scale_b, out_dtype, f"gluon {m}x{n}x{k} {scaling} {out_dtype}")
    fast = matmul_fp8(a, b, scale_a, scale_b, path="gluon", fast_accum=True)
    assert last_launch("matmul-fp8").startswith("gluon fast-accum:")
    ref = dequantised_product(a, b, scale_a, scale_b)  # the whole K in the tensor cores' accumulator: the norm
    err = ((fast.float() - ref).norm() / ref.norm()).item()
    assert err <= fp8_tolerance(torch.bfloat16), f"gluon fast accum {m}x{n}x{k}: {err:.2e}"


def test_prune_fp8_configs():
    """Shared memory counts the output's element size; precise accumulation drops the 128x256 tiles (which
    spill with its second accumulator) and keeps 256x128 (which does not)."""
    cfg = f8._cfg
    big, big4, tall, mid, small = (
        cfg(128, 256, 128, 8, 3),
        cfg(128, 256, 128, 8, 4, subtile=True),
        cfg(256, 128, 128, 8, 3),
        cfg(128, 128, 128, 8, 4),
        cfg(64, 64, 128, 4, 4),
    )
    configs = [big, big4, tall, mid, small]

    def kept(out_dtype, m=4096, n=4096, **flags):
        args = {"c_ptr": torch.empty(1, dtype=out_dtype), "M": m, "N": n}
        return f8.prune_fp8_configs(configs, args, **flags)

    assert kept(torch.bfloat16, FAST_ACCUM=True) == configs
    # An fp32 output tile staged for TMA: 128 or 64 KiB more, past 227 KiB with the 128x256 pipelines.
    assert kept(torch.float32, FAST_ACCUM=True) == [mid, small]
    assert kept(torch.bfloat16, FAST_ACCUM=False) == [tall, mid, small]
    assert kept(torch.bfloat16, m=48, n=40, FAST_ACCUM=True) == [small]  # tiles no larger than the problem
    # Two programs an SM only where both fit its shared memory: 3 stages and half-width stores, not 4 stages.
    pair, crowded = f8.fp8_cfg(128, 128, 128, 4, 3, subtile=True, per_sm=2), f8.fp8_cfg(128, 128, 128, 4, 4, per_sm=2)
    args = {"c_ptr": torch.empty(1, dtype=torch.bfloat16), "M": 4096, "N": 4096}
    assert f8.prune_fp8_configs([pair, crowded, small], args, FAST_ACCUM=False) == [pair, small]
    # Split products keep 128x256 in precise accumulation (no second full-size accumulator), never in fast.
    split = f8.fp8_cfg(128, 256, 128, 8, 3, split_n=True)
    assert f8.prune_fp8_configs([big, split, small], args, FAST_ACCUM=False) == [split, small]
    assert f8.prune_fp8_configs([big, split, small], args, FAST_ACCUM=True) == [big, small]
