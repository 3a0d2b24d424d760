"""Backward of layer_norm, rms_norm and bias_gelu_layer_norm against float64 autograd on the references."""

import importlib

import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from build_script import run_build_script
from grad_checks import assert_grad_close, grad_errors, reference_grads

from tierbench.kernels import bias_gelu_layer_norm, layer_norm, rms_norm
from tierbench.kernels._common import last_launch
from tierbench.suite.measure.checking import ELEMENT_TOLERANCE, TOLERANCE
from tierbench.suite.ops.norm import bias_gelu_layer_norm_ref, layer_norm_ref, rms_norm_ref

nm = importlib.import_module("tierbench.kernels.norm")
nb = importlib.import_module("tierbench.kernels.norm_backward")
nmath = importlib.import_module("tierbench.kernels._norm_math")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
DTYPES = [torch.float16, torch.bfloat16, torch.float32]

# Each op: the kernel, its float64 reference, the names of its inputs after x (vectors of shape (hidden,)).
OPS = {
    "layer_norm": (lambda x, w, b: layer_norm(x, w, b, 1e-5), lambda x, w, b: layer_norm_ref(x, w, b, 1e-5), "wb"),
    "rms_norm": (lambda x, w: rms_norm(x, w, 1e-6), lambda x, w: rms_norm_ref(x, w, 1e-6), "w"),
    "bias_gelu_layer_norm": (
        lambda x, xb, w, b: bias_gelu_layer_norm(x, xb, w, b, 1e-5),
        lambda x, xb, w, b: bias_gelu_layer_norm_ref(x, xb, w, b, 1e-5),
        "gwb",  # GELU bias, weight, LayerNorm bias
    ),
}
# Forced backward configs: whole rows one per tile (the interpreter's four programs walk 13 rows), the same
# with the vectors loaded every tile, rows split between two and four programs (hidden 333 in a block of 512:
# the second half, and the last two quarters, partly or wholly padding), and two passes in 128-wide chunks
# (three chunks, the last one ragged).
VARIANTS = {
    "auto": None,
    "rows1": nb.whole_row_config(rows=1, ctas=2),
    "reload": nb.whole_row_config(rows=1, ctas=2, reload=True),
    "pipelined": nb.whole_row_config(rows=1, ctas=2, stages=2),
    "split2": nb.whole_row_config(rows=1, ctas=2, split=2),
    "split4": nb.whole_row_config(rows=1, ctas=2, split=4, reload=True),
    "two_pass": nb.chunk_config(128),
}


def _rand(shape, dtype, device, gen, scale=1.0, offset=0.0):
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale + offset).to(device=device, dtype=dtype)


def _inputs(op, rows_shape, hidden, dtype, device, seed, present="gwb", param_dtype=None):
    """x (with a non-zero mean; x 3 for the fused op, to span GELU's curve and tails), the op's vectors
    (None where not in `present`), and a random output gradient."""
    g = torch.Generator().manual_seed(seed)
    x = _rand((*rows_shape, hidden), dtype, device, g, scale=3.0 if op == "bias_gelu_layer_norm" else 1.0, offset=1.0)
    vectors = [_rand((hidden,), param_dtype or dtype, device, g) if name in present else None for name in OPS[op][2]]
    return x, vectors, _rand((*rows_shape, hidden), dtype, device, g)


def _check_op(op, x, vectors, dy, what, config=None):
    """Forward and backward through the public function (or the launchers with a forced backward config),
    every gradient against float64 autograd."""
    kernel, ref_fn, _ = OPS[op]
    refs = reference_grads(ref_fn, [x, *vectors], dy)
    if config is None:
        leaves = [None if t is None else t.detach().clone().requires_grad_() for t in (x, *vectors)]
        out = kernel(*leaves)
        grads = torch.autograd.grad(out, [t for t in leaves if t is not None], dy)
        it = iter(grads)
        grads = [None if t is None else next(it) for t in leaves]
    else:
        grads = _launch_with_config(op, x, vectors, dy, config)
    for name, grad, ref, t in zip(("x", *OPS[op][2]), grads, refs, (x, *vectors)):
        if t is not None:
            assert_grad_close(grad, ref, t.dtype, f"{what} d{name}")


def _launch_with_config(op, x, vectors, dy, config):
    is_rms = op == "rms_norm"
    if op == "layer_norm":
        (w, b), gb = vectors, None
    elif is_rms:
        (w,), b, gb = vectors, None, None
    else:
        gb, w, b = vectors
    rows = x.numel() // x.shape[-1]
    rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
    mean = None if is_rms else torch.empty_like(rstd)
    nm._norm_forward(x, w, b, gb, 1e-6 if is_rms else 1e-5, is_rms, mean=mean, rstd=rstd)
    db_dtype = None if b is None else b.dtype
    dx, dw, db, dxb = nb.norm_backward(
        dy, x, w, gb, mean, rstd, is_rms, need_dw=True, db_dtype=db_dtype, need_dxb=True, gelu_impl=nm.GELU_IMPL,
        config=config,
    )  # fmt: skip
    return {"layer_norm": [dx, dw, db], "rms_norm": [dx, dw], "bias_gelu_layer_norm": [dx, dxb, dw, db]}[op]


# ----------------------------------------------------------------------------------------------------------
# The test helper itself must be able to fail
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_gradient_check_catches_a_wrong_or_unwritten_block(dtype):
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(512, 1024, generator=g, dtype=torch.float64)
    good = ref.to(dtype)  # the output's own rounding: passes
    assert_grad_close(good, ref, dtype, "rounded reference")
    unwritten = good.clone()
    unwritten[256:260, 64:72] = 0  # a 4x8 tile left at zero
    wrong = good.clone()
    wrong[7, 300] += 1.0  # one element off by the RMS
    for bad, what in ((unwritten, "unwritten tile"), (wrong, "one wrong element")):
        with pytest.raises(AssertionError):
            assert_grad_close(bad, ref, dtype, what)
        if dtype == torch.bfloat16:  # its L2 tolerance alone lets both through: the elementwise bound fails them
            assert grad_errors(bad, ref)[0] < TOLERANCE[dtype]
            with pytest.raises(AssertionError, match="off by"):
                assert_grad_close(bad, ref, dtype, what)
    with pytest.raises(AssertionError, match="NaN/inf"):
        assert_grad_close(torch.full_like(good, float("nan")), ref, dtype, "NaN")
    with pytest.raises(AssertionError, match="reference is zero"):
        assert_grad_close(good, torch.zeros_like(ref), dtype, "should be zero")
    assert ELEMENT_TOLERANCE[dtype] <= 0.1


# ----------------------------------------------------------------------------------------------------------
# Gradients
# ----------------------------------------------------------------------------------------------------------


# Every dtype through the tuned path; the forced programs once each (their code does not depend on the dtype).
CASES = [(dtype, "auto") for dtype in DTYPES] + [
    (torch.float16, "rows1"),
    (torch.bfloat16, "reload"),
    (torch.float16, "pipelined"),
    (torch.float16, "split2"),
    (torch.bfloat16, "split4"),
    (torch.bfloat16, "two_pass"),
]


@pytest.mark.parametrize("dtype,variant", CASES)
@pytest.mark.parametrize("op", list(OPS))
def test_norm_backward(op, dtype, variant, device):
    # 13 rows (not a multiple of the interpreter's 2-row tiles nor of its 4 programs) of width 333 (not a
    # power of two, so masked).
    x, vectors, dy = _inputs(op, (13,), 333, dtype, device, seed=1)
    _check_op(op, x, vectors, dy, f"{op} {dtype} {variant}", VARIANTS[variant])
    kind = "two-pass row sums" if variant == "two_pass" else "whole-row"
    assert last_launch("norm-bwd").startswith(f"{kind}: "), last_launch("norm-bwd")
    assert ("RELOAD=True" in last_launch("norm-bwd")) == (variant in ("reload", "split4")), last_launch("norm-bwd")
    assert ("STAGES=2," in last_launch("norm-bwd")) == (variant == "pipelined"), last_launch("norm-bwd")
    if variant.startswith("split"):
        assert f"SPLIT={variant[-1]}," in last_launch("norm-bwd"), last_launch("norm-bwd")


@pytest.mark.parametrize(
    "op,present",
    [("layer_norm", ""), ("layer_norm", "w"), ("layer_norm", "b"), ("rms_norm", ""), ("bias_gelu_layer_norm", "g")],
)
def test_optional_weight_and_bias(op, present, device):
    x, vectors, dy = _inputs(op, (2, 5), 100, torch.bfloat16, device, seed=2, present=present)
    _check_op(op, x, vectors, dy, f"{op} with {present or 'no vectors'}")


@pytest.mark.parametrize("op", ["layer_norm", "bias_gelu_layer_norm"])
def test_fp32_vectors_with_half_inputs(op, device):
    x, vectors, dy = _inputs(op, (7,), 96, torch.float16, device, seed=3, param_dtype=torch.float32)
    _check_op(op, x, vectors, dy, f"{op} fp32 vectors")


@pytest.mark.parametrize(
    "op,hidden,launch",
    [
        ("layer_norm", nb.MAX_WHOLE_ROW_BLOCK + 8, "split"),
        ("rms_norm", nb.MAX_WHOLE_ROW_BLOCK + 8, "split"),
        ("bias_gelu_layer_norm", nb.MAX_WHOLE_ROW_BLOCK + 8, "two-pass"),
        ("layer_norm", nb.MAX_SPLIT_ROW_BLOCK + 8, "two-pass"),
    ],
)
def test_rows_past_the_whole_row_width_take_split_rows_or_two_passes(op, hidden, launch, device):
    """Past what one program holds, LayerNorm and RMSNorm rows go to two programs a row up to
    MAX_SPLIT_ROW_BLOCK; the fused op, and wider rows, take the two passes."""
    x, vectors, dy = _inputs(op, (2,), hidden, torch.bfloat16, device, seed=4)
    _check_op(op, x, vectors, dy, f"{op} hidden {hidden}")
    launched = last_launch("norm-bwd")
    if launch == "split":
        assert launched.startswith("whole-row: ") and "SPLIT=2," in launched, launched
    else:
        assert "two-pass row sums: CHUNK=" in launched and "; two-pass chunks: CHUNK=" in launched, launched


def test_tuned_launch_by_width(monkeypatch):
    assert nb._tuned_path(nb.MAX_WHOLE_ROW_BLOCK, has_gelu=True) == "whole-row"
    assert nb._tuned_path(nb.MAX_WHOLE_ROW_BLOCK * 2, has_gelu=False) == "split-row"
    assert nb._tuned_path(nb.MAX_WHOLE_ROW_BLOCK * 2, has_gelu=True) == "two-pass"
    assert nb._tuned_path(nb.MAX_SPLIT_ROW_BLOCK * 2, has_gelu=False) == "two-pass"
    # The GPU's split-row list: every candidate two programs a row, and all kept at the widest rows it takes.
    monkeypatch.setattr(nb, "INTERPRET", False)
    tuned = nb.tuned_split_row_configs()
    assert len(tuned) == 2 and {c.kwargs["SPLIT"] for c in tuned} == {2}
    assert nb.prune_whole_row_configs(tuned, {"n_rows": 16384}, BLOCK_N=nb.MAX_SPLIT_ROW_BLOCK) == tuned


@pytest.mark.parametrize("variant", ["auto", "two_pass"])
def test_layer_norm_backward_with_an_outlier_first_value(variant, device):
    # The forward takes such rows' moments again about their mean: the mean it stores must be the full one.
    x, vectors, dy = _inputs("layer_norm", (4,), 256, torch.float32, device, seed=5)
    x[:, 0] = 1e4
    _check_op("layer_norm", x, vectors, dy, f"outlier first value {variant}", VARIANTS[variant])


def test_strided_rows_and_an_expanded_output_gradient(device):
    g = torch.Generator().manual_seed(6)
    wide = _rand((9, 160), torch.bfloat16, device, g, offset=1.0)
    w, b = _rand((100,), torch.bfloat16, device, g), _rand((100,), torch.bfloat16, device, g)
    xs = wide[:, 30:130].detach().requires_grad_()  # rows with a stride: no copy in the forward
    leaves = [xs, w.clone().requires_grad_(), b.clone().requires_grad_()]
    layer_norm(*leaves).sum().backward()  # the output's gradient arrives expanded (all strides 0)
    refs = reference_grads(lambda x, w, b: layer_norm_ref(x, w, b, 1e-5), [xs, w, b], torch.ones(9, 100).to(device))
    for name, t, ref in zip("xwb", leaves, refs):
        assert_grad_close(t.grad, ref, torch.bfloat16, f"strided d{name}")


def test_only_the_inputs_that_require_grad_get_one(device):
    x, (w, b), dy = _inputs("layer_norm", (6,), 64, torch.float16, device, seed=7)
    wr = w.clone().requires_grad_()
    (dw,) = torch.autograd.grad(layer_norm(x, wr, b), [wr], dy)
    refs = reference_grads(lambda x, w, b: layer_norm_ref(x, w, b, 1e-5), [x, w, b], dy)
    assert_grad_close(dw, refs[1], torch.float16, "dweight alone")
    xr = x.clone().requires_grad_()
    (dx,) = torch.autograd.grad(layer_norm(xr, w, b), [xr], dy)
    assert_grad_close(dx, refs[0], torch.float16, "dx alone")


def test_empty_rows(device):
    x = torch.randn(0, 64, device=device, requires_grad=True)
    w = torch.randn(64, device=device, requires_grad=True)
    layer_norm(x, w, None).sum().backward()
    assert x.grad.shape == (0, 64) and torch.equal(w.grad, torch.zeros(64, device=device))


def test_gradients_are_the_same_on_every_run(device):
    """Partial sums per program, added in a fixed order (no atomics): bit for bit the same gradients."""
    x, vectors, dy = _inputs("bias_gelu_layer_norm", (21,), 200, torch.bfloat16, device, seed=8)
    runs = []
    for _ in range(2):
        leaves = [x.clone().requires_grad_(), *(v.clone().requires_grad_() for v in vectors)]
        runs.append(torch.autograd.grad(bias_gelu_layer_norm(*leaves), leaves, dy))
    assert all(torch.equal(a, b) for a, b in zip(*runs))


# ----------------------------------------------------------------------------------------------------------
# What the forward stores and saves
# ----------------------------------------------------------------------------------------------------------


def test_forward_only_calls_store_and_save_nothing(device, monkeypatch):
    calls = []
    real = nm._norm_forward

    def spy(*args, **kwargs):
        calls.append((kwargs.get("mean"), kwargs.get("rstd")))
        return real(*args, **kwargs)

    monkeypatch.setattr(nm, "_norm_forward", spy)
    x, (w, b), _ = _inputs("layer_norm", (5,), 64, torch.float32, device, seed=9)
    assert layer_norm(x, w, b).grad_fn is None
    wr = w.clone().requires_grad_()
    with torch.no_grad():
        assert layer_norm(x, wr, b).grad_fn is None
    with torch.inference_mode():
        rms_norm(x, wr)
    assert calls == [(None, None)] * 3, "no statistics stored for inference"

    y = layer_norm(x, wr, b)
    mean, rstd = calls[-1]
    assert mean.dtype == rstd.dtype == torch.float32 and mean.shape == rstd.shape == (5,)
    assert torch.allclose(mean.double(), x.double().mean(-1), atol=1e-5)
    assert torch.allclose(rstd.double(), torch.rsqrt(x.double().var(-1, unbiased=False) + 1e-5), rtol=1e-5)
    saved = y.grad_fn.saved_tensors  # x, weight, GELU bias, mean, rstd: never the output
    assert saved[0] is x and saved[1] is wr and saved[2] is None and saved[3] is mean and saved[4] is rstd
    y = rms_norm(x, wr)
    assert calls[-1][0] is None and y.grad_fn.saved_tensors[3] is None, "RMSNorm stores rstd only"


def test_two_pass_forward_stores_the_same_statistics(device):
    x, (w, b), _ = _inputs("layer_norm", (6,), 100, torch.float32, device, seed=10)
    stats = []
    for config in (nm.norm_config(rows=1), nm.norm_config(chunk=32)):
        mean, rstd = torch.empty(6, device=device), torch.empty(6, device=device)
        nm._norm_forward(x, w, b, None, 1e-5, False, config=config, mean=mean, rstd=rstd)
        stats.append((mean, rstd))
    ref_rstd = torch.rsqrt(x.double().var(-1, unbiased=False) + 1e-5)
    for mean, rstd in stats:
        assert torch.allclose(mean.double(), x.double().mean(-1), atol=1e-6)
        assert torch.allclose(rstd.double(), ref_rstd, rtol=1e-6)


# ----------------------------------------------------------------------------------------------------------
# The GELU derivative
# ----------------------------------------------------------------------------------------------------------


@triton.jit
def _gelu_grad_elementwise(X, Y, DY, FWD, n, GELU_IMPL: tl.constexpr, PRECISE: tl.constexpr,
                           INLINE_PTX: tl.constexpr):  # fmt: skip
    offs = tl.program_id(0) * 1024 + tl.arange(0, 1024)
    x = tl.load(X + offs, mask=offs < n)
    y, dy = nmath._gelu_and_grad(x, GELU_IMPL, PRECISE, INLINE_PTX)
    tl.store(Y + offs, y, mask=offs < n)
    tl.store(DY + offs, dy, mask=offs < n)
    tl.store(FWD + offs, nmath._gelu_erf(x, GELU_IMPL, PRECISE, INLINE_PTX), mask=offs < n)  # the forward's


@pytest.mark.filterwarnings("ignore:overflow encountered in multiply:RuntimeWarning")  # x = +-1e30, on purpose
@pytest.mark.parametrize("impl,precise,bound", [(1, False, 8e-6), (1, True, 3e-7), (0, False, 3e-7)])
def test_gelu_derivative_error_and_tails(impl, precise, bound, device):
    """GELU'(x) = Phi(x) + x phi(x) against the float64 exact derivative, element by element, tails included;
    the GELU beside it bit for bit the forward's."""
    x = torch.cat([torch.linspace(-12, 12, 4001), torch.tensor([-1e30, -1e4, -40.0, 40.0, 1e4, 1e30, 0.0])])
    x = x.to(device=device, dtype=torch.float32)
    y, dy, forward = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 1024),)
    ptx = device.type == "cuda"
    _gelu_grad_elementwise[grid](x, y, dy, forward, x.numel(), GELU_IMPL=impl, PRECISE=precise, INLINE_PTX=ptx)
    xd = x.double().cpu().requires_grad_()
    (exact,) = torch.autograd.grad(F.gelu(xd).sum(), [xd])
    err = (dy.double().cpu() - exact).abs()
    assert torch.isfinite(dy).all()
    assert err.max().item() <= bound, f"max abs error {err.max().item():.2e} at x={x[err.argmax()].item()}"
    assert (dy[x >= 40] == 1).all() and (dy[x <= -40] == 0).all()  # saturated tails
    assert torch.equal(y, forward)


# ----------------------------------------------------------------------------------------------------------
# Configs
# ----------------------------------------------------------------------------------------------------------


def test_backward_pruning_rules():
    gpu_whole_rows = [nb.whole_row_config(r, c, w) for r in (1, 2, 4) for c in (1, 2, 4) for w in (2, 4, 8, 16, 32)]
    for block_n in (128, 1024, 4096, 8192):
        kept = nb.prune_whole_row_configs(gpu_whole_rows, {"n_rows": 16384}, BLOCK_N=block_n)
        assert kept, block_n
        for c in kept:
            assert 4 <= c.kwargs["ROWS"] * block_n // (32 * c.num_warps) <= 16
            assert c.kwargs["ROWS"] == 1 or block_n <= 1024
            assert c.kwargs["CTAS"] * c.num_warps <= 64
    # The pipelined candidates (STAGES 2) under the same rules: at 8192 the fused op's with RELOAD alone.
    for block_n, gelu, count in ((4096, False, 5), (8192, False, 3), (8192, True, 1)):
        kept = nb.prune_whole_row_configs(nb.pipelined_configs(), {"n_rows": 16384}, BLOCK_N=block_n, HAS_GELU=gelu)
        assert len(kept) == count and all(c.kwargs["STAGES"] == 2 for c in kept), (block_n, gelu)
    # The fused op at 8192 wide: only the builds that reload the vectors (the others spill).
    both = [nb.whole_row_config(1, 1, w, reload=r) for w in (16, 32) for r in (False, True)]
    fused = nb.prune_whole_row_configs(both, {"n_rows": 16384}, BLOCK_N=8192, HAS_GELU=True)
    assert len(fused) == 2 and all(c.kwargs["RELOAD"] for c in fused)
    assert len(nb.prune_whole_row_configs(both, {"n_rows": 16384}, BLOCK_N=8192, HAS_GELU=False)) == 4
    assert len(nb.prune_whole_row_configs(both, {"n_rows": 16384}, BLOCK_N=4096, HAS_GELU=True)) == 4
    # Split rows: the elements per thread and the widest row a program holds count a program's columns.
    for block_n in (16384, 65536):
        split = nb.prune_whole_row_configs(nb.split_row_configs(), {"n_rows": 16384}, BLOCK_N=block_n)
        held = {block_n // c.kwargs["SPLIT"] for c in split}
        assert split and max(held) <= nb.MAX_WHOLE_ROW_BLOCK, block_n
        assert all(4 <= block_n // c.kwargs["SPLIT"] // (32 * c.num_warps) <= 16 for c in split)
        assert all(c.kwargs["ROWS"] == 1 and (c.kwargs["EXCHANGE"] or not c.kwargs["PREFETCH"]) for c in split)
    assert {c.kwargs["SPLIT"] for c in split} == {8}, "rows of 65536: eight programs a row"
    gpu_chunks = [nb.chunk_config(c, w) for c in (512, 1024, 2048, 4096) for w in (2, 4, 8, 16)]
    for block_n in (16384, 65536):
        kept = nb.prune_chunk_configs(gpu_chunks, {}, BLOCK_N=block_n)
        assert kept and all(4 <= c.kwargs["CHUNK"] // (32 * c.num_warps) <= 16 for c in kept)


def test_forced_backward_configs_that_do_not_fit_are_refused(device):
    x, (w, b), dy = _inputs("layer_norm", (2,), 32, torch.float32, device, seed=11)
    with pytest.raises(ValueError, match="a chunk of 64 is wider than rows of 32"):
        _launch_with_config("layer_norm", x, [w, b], dy, nb.chunk_config(64))
    wide = torch.zeros(2, nb.MAX_WHOLE_ROW_BLOCK + 1, device=device)
    with pytest.raises(ValueError, match="do not fit the whole-row backward split 1 ways"):
        _launch_with_config("layer_norm", wide, [None, None], wide, nb.whole_row_config())
    with pytest.raises(ValueError, match="cannot be split 64 ways"):
        _launch_with_config("layer_norm", x, [w, b], dy, nb.whole_row_config(split=64))
    for bad in (
        {"split": 3},
        {"split": 0},
        {"split": 2, "rows": 2},
        {"split": 2, "prefetch": True},
        {"exchange": True},
        {"stages": 0},
        {"stages": 2, "prefetch": True},
    ):
        with pytest.raises(ValueError):
            nb.whole_row_config(**bad)


@pytest.mark.parametrize("op", ["rms_norm", "bias_gelu_layer_norm"])
def test_rows_past_the_whole_row_width_split_between_programs(op, device):
    """A forced split config takes rows wider than one program holds (the tuner's pick there is two passes)."""
    hidden = nb.MAX_WHOLE_ROW_BLOCK + 8
    x, vectors, _ = _inputs(op, (3,), hidden, torch.bfloat16, device, seed=14)
    # dy along x * weight: the row sums' terms are large (random dy leaves them near 0 at this width), so the
    # second program's 8 columns are wrong unless it has its partner's sums.
    dy = (x.float() * vectors[-2 if op == "bias_gelu_layer_norm" else 0].float()).to(x.dtype)
    _check_op(op, x, vectors, dy, f"{op} hidden {hidden} split 2", nb.whole_row_config(rows=1, ctas=1, split=2))
    assert "SPLIT=2," in last_launch("norm-bwd") and last_launch("norm-bwd").startswith("whole-row: ")


EXCHANGE = nb.whole_row_config(rows=1, ctas=1, warps=16, reload=True, split=2, exchange=True)


def test_programs_that_exchange_row_sums_are_refused_by_the_interpreter(device):
    if not nb.INTERPRET:
        pytest.skip("the interpreter's refusal")
    x, vectors, dy = _inputs("layer_norm", (3,), 64, torch.float32, device, seed=15)
    with pytest.raises(ValueError, match="wait on each other; the interpreter runs one at a time"):
        _launch_with_config("layer_norm", x, vectors, dy, EXCHANGE)


def test_exchange_builds_compile_for_sm90_with_release_and_acquire():
    # The exchange runs only on a GPU (its programs wait on each other): its sm_90 builds, compiled ahead of
    # time in a fresh process without the interpreter, publish by a release and read by an acquire.
    builds = run_build_script("norm_exchange_builds.py")
    assert len(builds) == 6, builds  # LayerNorm and RMSNorm, the three 16-warp exchange candidates each
    for build, got in builds.items():
        assert got["registers"] is not None and got["spill_bytes"] == 0, f"{build}: {got}"
        # One release a row; the acquire before and inside the wait; the partner's sums (two for LayerNorm)
        # and the launch's starting count read past L1.
        assert got["release"] == 1 and got["acquire"] >= 1, f"{build}: {got}"
        assert got["volatile_loads"] >= (3 if build.startswith("rms") else 5), f"{build}: {got}"


# ----------------------------------------------------------------------------------------------------------
# GPU, full size
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows,hidden", [(16384, 4096), (2048, 16384), (256, 65536), (1000, 333)])
@pytest.mark.parametrize("op", list(OPS))
def test_norm_backward_gpu_full_size(op, rows, hidden, dtype):
    x, vectors, dy = _inputs(op, (rows,), hidden, dtype, "cuda", seed=12)
    _check_op(op, x, vectors, dy, f"{op} {rows}x{hidden} {dtype}")
    path = nb._tuned_path(triton.next_power_of_2(hidden), has_gelu=op == "bias_gelu_layer_norm")
    launched = last_launch("norm-bwd")
    assert launched.startswith("two-pass row sums" if path == "two-pass" else "whole-row"), launched
    assert ("SPLIT=2," in launched) == (path == "split-row"), launched


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("hidden", [1024, 4096, 8192, 16384])
def test_every_backward_candidate_gpu(hidden):
    """Each candidate the tuners may pick, forced, on the fused op (the most registers) and RMSNorm."""
    block_n = triton.next_power_of_2(hidden)
    for op in ("bias_gelu_layer_norm", "rms_norm"):
        gelu = op == "bias_gelu_layer_norm"
        if block_n <= nb.MAX_WHOLE_ROW_BLOCK:  # the tuner's candidates, and the pipelined ones forced
            configs = nb.prune_whole_row_configs(
                nb.whole_row_configs() + nb.pipelined_configs(), {"n_rows": 1000}, BLOCK_N=block_n, HAS_GELU=gelu
            )
        else:  # the two passes, and the split whole-row candidates a forced config may take
            configs = nb.prune_chunk_configs(nb.chunk_configs(), {}, BLOCK_N=block_n)
            configs += nb.prune_whole_row_configs(
                nb.split_row_configs(), {"n_rows": 1000}, BLOCK_N=block_n, HAS_GELU=gelu
            )
        x, vectors, dy = _inputs(op, (1000,), hidden, torch.bfloat16, "cuda", seed=13)
        for cfg in configs:
            _check_op(op, x, vectors, dy, f"{op} {hidden} {cfg}", cfg)


def test_partial_sums_reduction_fills_the_gpu():
    # Columns per program halve from 256 until the programs (column blocks x gradients) fill two waves of 132
    # SMs, to 32 at least (64 at most under the interpreter); a step adds 4096 partial sums on a GPU.
    for (n, grads), block_c in {(4096, 2): 32, (16384, 2): 64, (65536, 1): 128, (1 << 20, 1): 256}.items():
        cfg = nb.sum_partials_config(n, grads, 132)
        want_c = min(block_c, 64) if nb.INTERPRET else block_c
        want_p = 16 if nb.INTERPRET else 4096 // block_c
        assert cfg.kwargs == {"BLOCK_P": want_p, "BLOCK_C": want_c}, (n, grads)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_exchanged_row_sums_gpu(op, dtype, monkeypatch):
    """Two programs a row trading their sums: a ragged second half (16376 of 16384 columns), rows not a
    multiple of the programs; counters that earlier launches left (as the tuner's replays do); a CUDA graph
    replayed."""
    hidden = 16376
    x, vectors, _ = _inputs(op, (1000,), hidden, dtype, "cuda", seed=16)
    dy = (x.float() * vectors[0].float()).to(dtype)  # large row sums: a partner's missing sum shows
    for cfg in [c for c in nb.split_row_configs() if c.kwargs["EXCHANGE"]]:
        if nb.prune_whole_row_configs([cfg, EXCHANGE], {"n_rows": 1000}, BLOCK_N=16384) != [cfg, EXCHANGE]:
            continue
        _check_op(op, x, vectors, dy, f"{op} {hidden} {dtype} {cfg}", cfg)
        assert "EXCHANGE=True" in last_launch("norm-bwd"), last_launch("norm-bwd")
    refs = reference_grads(OPS[op][1], [x, *vectors], dy)
    fresh = nb._exchange_buffers

    def counted_before(*args):  # every program 7 rows published by launches before this one
        sums, counts = fresh(*args)
        return sums, counts.fill_(7)

    with monkeypatch.context() as m:
        m.setattr(nb, "_exchange_buffers", counted_before)
        _check_op(op, x, vectors, dy, f"{op} {hidden} {dtype} counters at 7", EXCHANGE)
    _launch_with_config(op, x, vectors, dy, EXCHANGE)  # compiled outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        grads = _launch_with_config(op, x, vectors, dy, EXCHANGE)
    for replay in range(3):
        for g in grads:
            g.zero_()
        graph.replay()
        torch.cuda.synchronize()
        for name, grad, ref, t in zip(("x", *OPS[op][2]), grads, refs, (x, *vectors)):
            assert_grad_close(grad, ref, t.dtype, f"{op} replay {replay} d{name}")
