"""A few wrong elements fail the check, for every op: through the real runner, with test providers that
take a real provider's output (or gradient) and break a small block of it: an unwritten tail of 32
elements (of 2^19), one row holding its neighbour's values, one head (attention) or one tile of up to
64 x 64 (the others) holding its neighbour's.

Each block fails by the elementwise bound alone; the tail is small enough that the norm-wise error stays
under the tolerance (the record says so), so without the elementwise bound it would have been ranked. The
real provider, in the same case, passes.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from cpu_run import FAST

from tierbench.suite.ceilings import Ceilings
from tierbench.suite.measure.checking import tolerances
from tierbench.suite.measure.runner import RunContext, measure_case
from tierbench.suite.ops import _matmul_epilogue, _matmul_fp8, attention, decode, matmul, model, norm, pointwise
from tierbench.suite.providers.base import Prepared, Provider
from tierbench.timing import make_timer

# Many providers and cases, each judged on its record alone: one round of one or two calls is enough.
ONE_ROUND = dataclasses.replace(FAST, rounds=1, min_reps=1, max_reps=2)

MATMUL_MNK = {"fwd": (1024, 512, 64), "bwd": (1024, 64, 512)}  # out, or da, of 1024 x 512
NORM_ROWS = {"fwd": (512, 1024), "bwd": (64, 8192)}

# Per op: a bf16 case of 2^19 output elements (gradient of the first input too), and the real provider.
CASES = {
    "matmul": (lambda mode: matmul.make_case(*MATMUL_MNK[mode], "bf16", mode), "eager"),
    "matmul_bias_gelu": (lambda mode: _matmul_epilogue.make_case(*MATMUL_MNK[mode], "gelu", "bf16", mode), "eager"),
    # (Backward: 64 rows, since eager's bf16 weight gradient on a CPU drifts past 1e-2 by 512 rows.)
    **{
        kind: (lambda mode, kind=kind: norm.make_case(kind, *NORM_ROWS[mode], "bf16", mode), "eager")
        for kind in ("layer_norm", "rms_norm", "bias_gelu_layer_norm")
    },
    **{
        name: (lambda mode, name=name: pointwise.make_case(name, *NORM_ROWS[mode], "bf16", mode), "eager")
        for name in ("silu_mul", "residual_add")
    },
    # Two outputs (the normalised rows and the sum): the first is the one damaged.
    "add_rms_norm": (lambda mode: norm.make_case("add_rms_norm", *NORM_ROWS[mode], "bf16", mode), "eager"),
    "attention": (lambda mode: attention.make_case(8, 16, 64, 64, False, "bf16", mode), "sdpa-math"),
    # A model's block, held to its own bounds (three times a single op's, so 2^16 output elements keep the
    # missing tail under its norm-wise bound): prefill forward, training's backward (its mode is fwd_bwd),
    # a decode step.
    "llama_block": (
        lambda mode: model.make_case(
            "t", "prefill" if mode == "fwd" else "training", 1, 256, 256, 4, 2, 64, 512, "bf16"
        ),
        "eager",
    ),
    "llama_block_decode": (
        lambda mode: model.make_case("t", "decode", 128, 16, 512, 8, 2, 64, 1024, "bf16"),
        "eager",
    ),
    # Decode, forward only: 32 sequences of 4 new tokens, 32 query heads over 8 K/V heads, ragged caches.
    "decode": (lambda mode: decode.make_case(32, 32, 8, 4, 64, 128, "bf16", mode, lengths="ragged"), "sdpa-math"),
    "decode_paged": (
        lambda mode: decode.make_case(32, 32, 8, 4, 64, 128, "bf16", mode, lengths="ragged", page_size=16),
        "compile",
    ),
}
NO_BACKWARD = {"decode", "decode_paged", "matmul_fp8", "llama_block_decode"}
# Needs FP8 tensor cores: on a GPU only, forward only (e4m3 operands, a bf16 output).
FP8 = {"matmul_fp8": (lambda mode: _matmul_fp8.make_case(1024, 512, 64, "per_tensor"), "eager")}


def missing_tail(t: torch.Tensor) -> None:
    t.view(-1)[-32:] = 0  # a kernel whose last block never ran


def one_wrong_row(t: torch.Tensor) -> None:
    rows = t.view(-1, t.shape[-1])
    middle = rows.shape[0] // 2
    rows[middle] = rows[middle + 1]  # an off-by-one row index


def one_wrong_head(t: torch.Tensor) -> None:
    if t.dim() == 4:  # attention: (batch, heads, seq, head_dim)
        t[0, 3] = t[0, 4]
    else:  # one tile of a tiled kernel, from the middle row on, holding its neighbour's values
        rows = t.view(-1, t.shape[-1])
        middle = rows.shape[0] // 2
        rows[middle : middle + 64, 64:128] = rows[middle : middle + 64, 128:192]


DAMAGES = {"missing-tail": missing_tail, "one-wrong-row": one_wrong_row, "one-wrong-head": one_wrong_head}


class _DamagedGradient(torch.autograd.Function):
    """Identity forward; the backward breaks the gradient that flows back to the input."""

    @staticmethod
    def forward(ctx, t, damage):
        ctx.damage = damage
        return t.clone()

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        ctx.damage(grad)
        return grad, None


def damaged(real: Provider, name: str, damage, op, mode: str) -> Provider:
    """The real provider with one damage: to its output (fwd) or to its first input's gradient (bwd)."""

    def prepare(inputs, options, case):
        if mode == "fwd":
            prepared = real.prepare(inputs, options, case)
            call = prepared.call if isinstance(prepared, Prepared) else prepared

            def broken_output():
                out = call()
                first = (out[0] if isinstance(out, tuple) else out).clone()
                damage(first)
                return (first, *out[1:]) if isinstance(out, tuple) else first

            return broken_output
        # The gradient taken against inputs[first] flows through the damaging identity.
        first = op.grads[0]
        return real.prepare({**inputs, first: _DamagedGradient.apply(inputs[first], damage)}, options, case)

    return Provider(name, real.tier, real.op, prepare)


def _ctx(tmp_path, device: torch.device) -> RunContext:
    ceilings = Ceilings(device_name=str(device), copy_gbps=10.0, matmul_tflops={"bf16": 0.1})
    return RunContext("t", tmp_path, device, make_timer(ONE_ROUND, device), ceilings, {"device_name": str(device)})


def _check_damages(tmp_path, catalog, cases, op_name: str, mode: str, device: torch.device) -> None:
    make, real_name = cases[op_name]
    case = make(mode)
    op = catalog.ops[op_name]
    tol, elem_tol = (op.tolerance or {}).get(case.out_dtype) or tolerances(case.out_dtype, case.dtype)
    real = next(p for p in catalog.providers() if p.op == op_name and p.name == real_name)
    providers = [real, *(damaged(real, name, damage, op, mode) for name, damage in DAMAGES.items())]
    records = {r.provider: r for r in measure_case(case, providers, _ctx(tmp_path, device), op)}

    assert records[real_name].status == "ok", records[real_name].reason
    assert records[real_name].element_error < elem_tol
    where = op.results[0] if mode == "fwd" else f"d{op.grads[0]}"
    for name in DAMAGES:
        r = records[name]
        assert r.status == "incorrect", (name, r.status, r.errors, r.element_error)
        assert r.median_ms is None  # never timed, never ranked
        # The elementwise bound alone fails each block, whatever the norm-wise error makes of it.
        assert r.element_error > elem_tol, (name, r.element_error)
    tail = records["missing-tail"]
    assert tail.errors[where] < tol, tail.errors  # the norm-wise error alone would have passed it
    assert "elementwise tolerance" in tail.reason


@pytest.mark.parametrize("mode", ["fwd", "bwd"])
@pytest.mark.parametrize("op_name", list(CASES))
def test_a_few_wrong_elements_fail_for_every_op(tmp_path, catalog, op_name, mode):
    if op_name in NO_BACKWARD and mode != "fwd":
        pytest.skip(f"{op_name} has no backward")
    _check_damages(tmp_path, catalog, CASES, op_name, mode, torch.device("cpu"))


def test_every_op_of_the_catalog_is_covered(catalog):
    assert set(catalog.ops) == set(CASES) | set(FP8)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["fwd", "bwd"])
@pytest.mark.parametrize("op_name", [*CASES, *FP8])
def test_a_few_wrong_elements_fail_for_every_op_on_a_gpu(tmp_path, catalog, op_name, mode):
    if op_name in NO_BACKWARD and mode != "fwd":
        pytest.skip(f"{op_name} has no backward")
    _check_damages(tmp_path, catalog, {**CASES, **FP8}, op_name, mode, torch.device("cuda"))
