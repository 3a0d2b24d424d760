"""layer_norm, rms_norm, bias_gelu_layer_norm: both kernels against the float64 references, and validation."""

import importlib

import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from tierbench.kernels import bias_gelu_layer_norm, layer_norm, rms_norm
from tierbench.suite.ops.norm import bias_gelu_layer_norm_ref, layer_norm_ref, rms_norm_ref

nm = importlib.import_module("tierbench.kernels.norm")
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
# Forced configs: whole rows one per program, and two passes in 32-wide chunks (hidden 100 -> 4 chunks, the
# last one ragged; hidden 64 -> 2 unmasked chunks), with the L2 hints.
ROW1 = {"config": nm.norm_config(rows=1)}
TWO_PASS = {"config": nm.norm_config(chunk=32, evict=1)}
# Persistent with prefetch: the interpreter's 4 "SMs" give each program several row tiles.
PERSISTENT = {"config": nm.norm_config(rows=1, ctas=1, evict=1)}
VARIANTS = {"auto": {}, "rows1": ROW1, "two_pass": TWO_PASS, "persistent": PERSISTENT}


def _rand(shape, dtype, device, gen, offset=0.0):
    return (torch.randn(shape, generator=gen, dtype=torch.float64) + offset).to(device=device, dtype=dtype)


def _ref_layer_norm(x, w, b, eps):
    return layer_norm_ref(x.cpu(), None if w is None else w.cpu(), None if b is None else b.cpu(), eps)


def _ref_rms_norm(x, w, eps):
    return rms_norm_ref(x.cpu(), None if w is None else w.cpu(), eps)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 3, 100), (5, 64), (100,)])
def test_layer_norm(shape, dtype, variant, device, assert_close):
    g = torch.Generator().manual_seed(0)
    x = _rand(shape, dtype, device, g, offset=3.0)  # a non-zero mean: the variance must be centred
    w, b = _rand(shape[-1:], dtype, device, g), _rand(shape[-1:], dtype, device, g)
    out = nm._norm_forward(x, w, b, None, 1e-5, False, **VARIANTS[variant])
    assert_close(out, _ref_layer_norm(x, w, b, 1e-5), dtype, f"layer_norm {shape} {variant}")


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm(dtype, variant, device, assert_close):
    g = torch.Generator().manual_seed(1)
    x = _rand((2, 7, 100), dtype, device, g)
    w = _rand((100,), dtype, device, g)
    out = nm._norm_forward(x, w, None, None, 1e-6, True, **VARIANTS[variant])
    assert_close(out, _ref_rms_norm(x, w, 1e-6), dtype, f"rms_norm {variant}")


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("is_rms", [False, True])
def test_strided_rows_of_a_power_of_two_width(is_rms, variant, device, assert_close):
    # Width 64 = BLOCK_N: the row length is a compile-time constant; the row stride (96) is not the width,
    # so it must stay the runtime one (packed rows take the width as their stride).
    g = torch.Generator().manual_seed(9)
    dtype = torch.bfloat16
    xs = _rand((7, 96), dtype, device, g, offset=2.0)[:, 16:80]
    w, b = _rand((64,), dtype, device, g), _rand((64,), dtype, device, g)
    if is_rms:
        out, ref = nm._norm_forward(xs, w, None, None, 1e-6, True, **VARIANTS[variant]), _ref_rms_norm(xs, w, 1e-6)
    else:
        out, ref = nm._norm_forward(xs, w, b, None, 1e-5, False, **VARIANTS[variant]), _ref_layer_norm(xs, w, b, 1e-5)
    assert_close(out, ref, dtype, f"strided width 64 {variant}")


@pytest.mark.filterwarnings("error:overflow encountered in exp2:RuntimeWarning")  # the tails saturate quietly
@pytest.mark.parametrize("gelu_impl", [0, 1])
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hidden", [100, 64])  # 64 = one whole tile: the unmasked (EVEN_N) build
def test_bias_gelu_layer_norm(dtype, variant, gelu_impl, hidden, device, assert_close):
    g = torch.Generator().manual_seed(2)
    x = _rand((3, 5, hidden), dtype, device, g) * 3  # spans GELU's curved part and both tails
    bias, w, lb = (_rand((hidden,), dtype, device, g) for _ in range(3))
    out = nm._norm_forward(x, w, lb, bias, 1e-5, False, gelu_impl=gelu_impl, **VARIANTS[variant])
    ref = bias_gelu_layer_norm_ref(x.cpu(), bias.cpu(), w.cpu(), lb.cpu(), 1e-5)  # exact erf GELU, float64
    assert_close(out, ref, dtype, f"bias_gelu_layer_norm {variant} impl {gelu_impl}")


@triton.jit
def _gelu_elementwise(X, Y, n, GELU_IMPL: tl.constexpr, PRECISE: tl.constexpr, INLINE_PTX: tl.constexpr):
    offs = tl.program_id(0) * 1024 + tl.arange(0, 1024)
    x = tl.load(X + offs, mask=offs < n)
    tl.store(Y + offs, nm._gelu_erf(x, GELU_IMPL, PRECISE, INLINE_PTX), mask=offs < n)


@pytest.mark.filterwarnings("ignore:overflow encountered in multiply:RuntimeWarning")  # x = +-1e30, on purpose
@pytest.mark.filterwarnings("error:overflow encountered in exp2:RuntimeWarning")  # the tails saturate quietly
@pytest.mark.parametrize("precise,bound", [(False, 4e-6), (True, 1e-6)])
def test_gelu_fit_error_and_tails(precise, bound, device):
    """The fused kernel's GELU, element by element, against the float64 exact GELU, tails included."""
    x = torch.cat([torch.linspace(-12, 12, 4001), torch.tensor([-1e30, -1e4, -40.0, 40.0, 1e4, 1e30, 0.0])])
    x = x.to(device=device, dtype=torch.float32)
    y = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 1024),)
    _gelu_elementwise[grid](x, y, x.numel(), GELU_IMPL=1, PRECISE=precise, INLINE_PTX=device.type == "cuda")
    exact = F.gelu(x.double().cpu()).to(device)
    err = (y.double() - exact).abs()
    assert torch.isfinite(y).all()
    assert err.max().item() <= bound, f"max abs error {err.max().item():.2e} at x={x[err.argmax()].item()}"
    assert y[x >= 40].equal(x[x >= 40]) and (y[x <= -40] == 0).all()  # saturated tails: x and -0


def test_public_functions_and_optional_params(device, assert_close):
    g = torch.Generator().manual_seed(3)
    dtype = torch.bfloat16
    x = _rand((6, 100), dtype, device, g)
    w32, b32 = _rand((100,), torch.float32, device, g), _rand((100,), torch.float32, device, g)  # fp32 params
    assert_close(layer_norm(x, w32, b32, eps=1e-3), _ref_layer_norm(x, w32, b32, 1e-3), dtype, "fp32 weights")
    assert_close(layer_norm(x, None, None), _ref_layer_norm(x, None, None, 1e-5), dtype, "no affine")
    assert_close(rms_norm(x, None), _ref_rms_norm(x, None, 1e-6), dtype, "rms no weight")
    assert_close(rms_norm(x, w32, 1e-2), _ref_rms_norm(x, w32, 1e-2), dtype, "rms eps")
    xb = _rand((100,), dtype, device, g)
    ref = _ref_layer_norm(F.gelu(x.double().cpu() + xb.double().cpu()), None, None, 1e-5)
    assert_close(bias_gelu_layer_norm(x, xb, None, None), ref, dtype, "bias_gelu no affine")
    # Rows with a stride (a column slice of a wider tensor) need no copy.
    wide = _rand((6, 160), dtype, device, g)
    xs = wide[:, 30:130]
    assert_close(layer_norm(xs, w32, b32), _ref_layer_norm(xs, w32, b32, 1e-5), dtype, "strided rows")
    assert layer_norm(x[:0], None, None).shape == (0, 100)


def test_norm_validation(device, wrong_device):
    x = torch.randn(4, 8, device=device, dtype=torch.float16)
    w = torch.randn(8, device=device, dtype=torch.float16)
    with pytest.raises(TypeError, match=r"layer_norm: x must be a torch.Tensor, got ndarray"):
        layer_norm(x.cpu().numpy(), w, w)
    with pytest.raises(
        TypeError, match=r"rms_norm: x must have dtype in \(float16, bfloat16, float32\), got torch.int64"
    ):
        rms_norm(x.long(), w)
    with pytest.raises(ValueError, match=r"layer_norm: x must have at least 1 dims, got shape \(\)"):
        layer_norm(x[0, 0], None, None)
    with pytest.raises(ValueError, match=r"layer_norm: x must have a non-empty last dim, got shape \(4, 0\)"):
        layer_norm(x[:, :0], None, None)
    with pytest.raises(ValueError, match=r"rms_norm: x must be contiguous in its last dim, got strides \(8, 2\)"):
        rms_norm(x[:, ::2], None)
    with pytest.raises(ValueError, match=r"layer_norm: x must be viewable as \(rows, 8\) without a copy"):
        layer_norm(x.reshape(2, 2, 8).transpose(0, 1), None, None)
    with pytest.raises(
        ValueError, match=r"layer_norm: weight must have shape \(8,\) to match x's last dim, got shape \(7,\)"
    ):
        layer_norm(x, w[:7], None)
    with pytest.raises(
        TypeError, match=r"layer_norm: bias must have dtype in \(float16, float32\), got torch.bfloat16"
    ):
        layer_norm(x, w, w.bfloat16())
    with pytest.raises(ValueError, match=r"rms_norm: weight must be contiguous, got stride 2"):
        rms_norm(x, torch.randn(16, device=device, dtype=torch.float16)[::2])
    with pytest.raises(ValueError, match=r"layer_norm: weight must be .*(device|CUDA)"):
        layer_norm(x, w.to(wrong_device), None)
    with pytest.raises(ValueError, match=r"rms_norm: x must be .*got device"):
        rms_norm(x.to(wrong_device), None)
    with pytest.raises(ValueError, match=r"layer_norm: eps must be >= 0, got -1.0"):
        layer_norm(x, w, w, eps=-1.0)
    with pytest.raises(TypeError, match=r"rms_norm: eps must be a float, got str"):
        rms_norm(x, w, eps="1e-6")
    with pytest.raises(TypeError, match=r"bias_gelu_layer_norm: bias must be a torch.Tensor, got NoneType"):
        bias_gelu_layer_norm(x, None, w, w)
    with pytest.raises(ValueError, match=r"bias_gelu_layer_norm: ln_bias must have shape \(8,\)"):
        bias_gelu_layer_norm(x, w, w, w[:4])


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows,hidden", [(16384, 4096), (2048, 16384), (256, 65536)])
def test_norms_gpu_full_size(rows, hidden, dtype, assert_close):
    g = torch.Generator(device="cuda").manual_seed(4)
    x = torch.randn(rows, hidden, device="cuda", dtype=dtype, generator=g)
    w, b, xb = (torch.randn(hidden, device="cuda", dtype=dtype, generator=g) for _ in range(3))
    xd, wd, bd, xbd = x.double(), w.double(), b.double(), xb.double()
    assert_close(layer_norm(x, w, b), F.layer_norm(xd, (hidden,), wd, bd, 1e-5), dtype, "layer_norm")
    ref = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * wd
    assert_close(rms_norm(x, w), ref, dtype, "rms_norm")
    ref = F.layer_norm(F.gelu(xd + xbd), (hidden,), wd, bd, 1e-5)
    assert_close(bias_gelu_layer_norm(x, xb, w, b), ref, dtype, "bias_gelu_layer_norm")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("hidden", [4096, 16384])
def test_every_config_gpu(hidden, assert_close):
    """Each candidate the autotuner may pick (whole-row, persistent and two-pass ones), forced, on 1000 rows."""
    g = torch.Generator(device="cuda").manual_seed(5)
    dtype = torch.bfloat16
    x = torch.randn(1000, hidden, device="cuda", dtype=dtype, generator=g)
    w, b, xb = (torch.randn(hidden, device="cuda", dtype=dtype, generator=g) for _ in range(3))
    ref = bias_gelu_layer_norm_ref(x.cpu(), xb.cpu(), w.cpu(), b.cpu(), 1e-5)
    configs = nm.prune_norm_configs(nm.norm_configs(), {"n_rows": 1000, "N": hidden}, BLOCK_N=hidden)
    assert any(c.kwargs["CTAS"] for c in configs), "persistent candidates are kept at this width"
    assert any(c.kwargs["CHUNK"] for c in configs) == (hidden >= nm.MIN_TWO_PASS_BLOCK)
    for cfg in configs:
        out = nm._norm_forward(x, w, b, xb, 1e-5, False, config=cfg)
        assert_close(out, ref, dtype, f"bias_gelu_layer_norm {cfg}")


def _candidates(hidden: int, n_rows: int = 16384) -> list[tuple[int, int, int, int, int]]:
    """(CHUNK, ROWS, CTAS, EVICT, warps) of every candidate the pruning rule keeps, with the GPU's list."""
    block_n = triton.next_power_of_2(hidden)
    gpu_list = [nm.norm_config(chunk=c, rows=r, ctas=p, evict=e, warps=w)
                for c in (0, 1024, 2048, 4096) for r in (1, 2, 4, 8) for p in (0, nm.PERSISTENT_CTAS)
                for e in (0, 1) for w in (1, 2, 4, 8, 16, 32) if not (c and (r > 1 or p))]  # fmt: skip
    kept = nm.prune_norm_configs(gpu_list, {"n_rows": n_rows, "N": hidden}, BLOCK_N=block_n)
    return [(c.kwargs["CHUNK"], c.kwargs["ROWS"], c.kwargs["CTAS"], c.kwargs["EVICT"], c.num_warps) for c in kept]


def test_pruning_rule():
    """Whole rows up to 16384 with 8..32 elements a thread; two passes from 8192, required beyond 16384."""
    for hidden in (100, 1024, 4096, 8192, 16384, 65536):
        kept = _candidates(hidden)
        block_n = triton.next_power_of_2(hidden)
        assert kept, hidden
        for chunk, rows, ctas, evict, warps in kept:
            per_thread = (chunk or rows * block_n) // (32 * warps)
            if chunk:
                assert block_n >= nm.MIN_TWO_PASS_BLOCK and 2 * chunk <= block_n and 4 <= per_thread <= 16
            else:
                assert block_n <= nm.MAX_FUSED_BLOCK and 8 <= per_thread <= 32
                assert rows == 1 or block_n <= 1024
                assert not (ctas or evict) or block_n >= 4096
        kinds = {bool(k[0]) for k in kept}
        assert kinds == ({False} if hidden < 8192 else {False, True} if hidden <= 16384 else {True}), hidden
    assert _candidates(8) == [(0, 1, 0, 0, 1)], "tiny rows: the smallest whole-row tile"
    assert all(rows <= 2 for _, rows, *_ in _candidates(512, n_rows=2)), "never more rows than exist"


def test_forced_configs_that_do_not_fit_are_refused(device):
    x = torch.zeros(2, 20000, device=device, dtype=torch.float32)
    with pytest.raises(ValueError, match="do not fit the whole-row programs"):
        nm._norm_forward(x, None, None, None, 1e-5, False, config=nm.norm_config(rows=1))
    with pytest.raises(ValueError, match="a chunk of 64 is wider than rows of 32"):
        nm._norm_forward(x[:, :32], None, None, None, 1e-5, False, config=nm.norm_config(chunk=64))


@pytest.mark.parametrize("variant", ["rows1", "two_pass"])
def test_variance_is_centred_for_a_large_mean(variant, device, assert_close):
    """Mean 1000, std 1: E[x^2] - E[x]^2 in fp32 would lose the variance; both programs centre first."""
    g = torch.Generator().manual_seed(6)
    x = _rand((3, 256), torch.float32, device, g, offset=1000.0)
    out = nm._norm_forward(x, None, None, None, 1e-5, False, **VARIANTS[variant])
    assert_close(out, _ref_layer_norm(x, None, None, 1e-5), torch.float32, f"layer_norm mean 1000 {variant}")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize(
    "dtype,widths",
    [
        (torch.bfloat16, (1, 7, 100, 255, 256, 1000, 3000, 8191, 20000)),
        (torch.float16, (100, 1000, 20000)),
        (torch.float32, (100, 1000, 20000)),
    ],
)
def test_small_and_odd_hidden_sizes_gpu(dtype, widths, assert_close):
    """Widths around the kernels' switches (inline PTX from 256, two passes from 8192, chunks past 16384),
    each with the first and the last candidate the pruning rule keeps (bf16; the first for the others)."""
    g = torch.Generator(device="cuda").manual_seed(7)
    for hidden in widths:
        x = torch.randn(37, hidden, device="cuda", dtype=dtype, generator=g) + 2.0
        w, b, xb = (torch.randn(hidden, device="cuda", dtype=dtype, generator=g) for _ in range(3))
        xd, wd, bd, xbd = x.double(), w.double(), b.double(), xb.double()
        refs = {
            "layer_norm": (F.layer_norm(xd, (hidden,), wd, bd, 1e-5), (w, b, None, 1e-5, False)),
            "rms_norm": (xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * wd, (w, None, None, 1e-6, True)),
            "bias_gelu_ln": (F.layer_norm(F.gelu(xd + xbd), (hidden,), wd, bd, 1e-5), (w, b, xb, 1e-5, False)),
        }
        kept = nm.prune_norm_configs(nm.norm_configs(), {"n_rows": 37, "N": hidden}, BLOCK_N=nm.next_pow2(hidden))
        for cfg in kept[:: max(1, len(kept) - 1)] if dtype == torch.bfloat16 else kept[:1]:
            for op, (ref, args) in refs.items():
                assert_close(nm._norm_forward(x, *args, config=cfg), ref, dtype, f"{op} {hidden} {cfg}")


def test_rows_per_sm_bands_pick_separate_autotuners(device, assert_close):
    """A width autotuned at few rows is tuned again, not reused, at many rows per SM."""
    assert [nm.rows_per_sm_band(n, 132) for n in (1, 1055, 1056, 8447, 8448, 16384)] == [0, 0, 1, 1, 2, 2]
    sms = nm.num_sms(device)
    g = torch.Generator().manual_seed(8)
    w = _rand((48,), torch.float32, device, g)
    for band, n_rows in enumerate((1, 8 * sms, 64 * sms)):
        for tuner in nm._norm_tuned:
            tuner.best_config = None  # set by the autotuner that launches
        x = _rand((n_rows, 48), torch.float32, device, g)
        assert_close(nm.rms_norm(x, w), _ref_rms_norm(x, w, 1e-6), torch.float32, f"rms_norm {n_rows} rows")
        assert [t.best_config is not None for t in nm._norm_tuned] == [i == band for i in range(3)]


@pytest.mark.parametrize("variant", ["rows1", "two_pass"])
def test_variance_is_exact_when_the_first_value_is_an_outlier(variant, device, assert_close):
    """The moments are taken about each row's first value; an outlier there (an LLM's massive-activation
    channel) must not cost fp32 its precision: such rows get their variance again, centred."""
    g = torch.Generator().manual_seed(9)
    x = _rand((2, 4096), torch.float64, "cpu", g)
    x[:, 0] = 1e6  # 64 standard deviations of the row from its mean
    x = x.to(device=device, dtype=torch.float32)
    out = nm._norm_forward(x, None, None, None, 1e-5, False, **VARIANTS[variant])
    assert_close(out, _ref_layer_norm(x, None, None, 1e-5), torch.float32, f"outlier first value {variant}")
