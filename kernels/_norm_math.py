"""Elementwise fp32 helpers of the norm kernels (forward and backward): MUFU exp2 and reciprocal, bf16
widening, the fused op's exact-erf GELU with its derivative, and two row sums in one reduction.

The GELU is x * Phi(x). `GELU_IMPL=0` takes Phi from libdevice's erff (the textbook form, kept as the
reference variant); `GELU_IMPL=1` writes Phi as sigmoid(g(x)), g an odd polynomial fitted to logit(Phi)
(experiments/fit_gelu.py): Phi within 6.8e-6 with 5 terms (for 16-bit outputs), 1.1e-7 with 7 (float32),
the GELU within 3.6e-6 and 7.8e-7, in ~10 instructions per element. The backward's derivative,
GELU'(x) = Phi(x) + x phi(x), reuses that Phi, so it matches the exact derivative to within Phi's error.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._common import INTERPRET

_INTERPRETED = tl.constexpr(INTERPRET)
_MINUS_HALF_LOG2E = tl.constexpr(-0.7213475204444817)  # -log2(e) / 2: phi(x) = 2^(x^2 * this) / sqrt(2 pi)
_INV_SQRT_2PI = tl.constexpr(0.3989422804014327)


@triton.jit
def _exp2(x, INLINE_PTX: tl.constexpr):
    if INLINE_PTX:  # one MUFU.EX2; tl.math.exp2 adds a subnormal rescale around it
        return tl.inline_asm_elementwise(
            "ex2.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1
        )
    elif _INTERPRETED:
        # The GELU's tails saturate exp2 to inf by design, and numpy warns of that overflow on every call: the
        # interpreter gives the inf without the overflow. Compiled code is untouched (a branch it never has).
        return tl.where(x > 127.0, float("inf"), tl.math.exp2(tl.minimum(x, 127.0)))
    else:
        return tl.math.exp2(x)


@triton.jit
def _reciprocal(x, INLINE_PTX: tl.constexpr):
    if INLINE_PTX:  # one MUFU.RCP; a division adds range checks the callers' operands (>= 1) never need
        return tl.inline_asm_elementwise(
            "rcp.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1
        )
    else:
        return 1.0 / x


@triton.jit
def _to_f32(x, INLINE_PTX: tl.constexpr):
    if INLINE_PTX and x.dtype == tl.bfloat16:
        # A bf16 pair sits in one 32-bit register; each half becomes an fp32 by one shift or one mask. The
        # compiler's own widening of the upper half takes two instructions (PRMT + SHF), 1.5 a element.
        return tl.inline_asm_elementwise(
            "{ shl.b32 $0, $2, 16; and.b32 $1, $2, 0xffff0000; }",
            "=r,=r,r",
            [x],
            dtype=tl.float32,
            is_pure=True,
            pack=2,
        )
    else:
        return x.to(tl.float32)


@triton.jit
def _normal_cdf_fit(x, PRECISE: tl.constexpr, INLINE_PTX: tl.constexpr):
    # Phi(x) = 1 / (1 + 2^(x p(x^2))): g's coefficients times -log2(e). No branch: the exp2 saturates to 0
    # or inf in the tails, giving 1 or 0 like the exact Phi.
    z = x * x
    if PRECISE:
        p = -5.209928045e-09
        p = p * z + 3.850458654e-07
        p = p * z - 1.145244369e-05
        p = p * z + 1.593895140e-04
        p = p * z + 9.559258615e-05
        p = p * z - 1.048385799e-01
        p = p * z - 2.302207232e00
    else:
        p = -3.210383738e-06
        p = p * z + 8.790987340e-05
        p = p * z + 3.620472271e-04
        p = p * z - 1.052299738e-01
        p = p * z - 2.302043676e00
    return _reciprocal(1.0 + _exp2(x * p, INLINE_PTX), INLINE_PTX)


@triton.jit
def _gelu_erf(x, GELU_IMPL: tl.constexpr, PRECISE: tl.constexpr, INLINE_PTX: tl.constexpr):
    # Exact GELU, x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)); GELU_IMPL 1: Phi fitted (see the module docstring).
    if GELU_IMPL == 0:
        return 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    else:
        return x * _normal_cdf_fit(x, PRECISE, INLINE_PTX)


@triton.jit
def _gelu_and_grad(x, GELU_IMPL: tl.constexpr, PRECISE: tl.constexpr, INLINE_PTX: tl.constexpr):
    # GELU(x), bit for bit as _gelu_erf computes it, and GELU'(x) = Phi(x) + x phi(x).
    if GELU_IMPL == 0:
        erf = tl.math.erf(x * 0.7071067811865476)
        gelu = 0.5 * x * (1.0 + erf)
        cdf = 0.5 + 0.5 * erf
    else:
        cdf = _normal_cdf_fit(x, PRECISE, INLINE_PTX)
        gelu = x * cdf
    # phi underflows to 0 in the tails (x^2 = inf included), so x * phi is 0 there.
    pdf = _exp2(x * x * _MINUS_HALF_LOG2E, INLINE_PTX) * _INV_SQRT_2PI
    return gelu, cdf + x * pdf


@triton.jit
def _add_pairs(a0, b0, a1, b1):
    return a0 + a1, b0 + b1


@triton.jit
def _sum_pair(a, b, axis: tl.constexpr):
    # Two sums in one reduction: one round of shared-memory exchange and barriers instead of two. The
    # interpreter runs a custom combine step by step (LayerNorm 512x1024 took 31 s instead of 1): there,
    # two plain sums, the same numbers.
    if _INTERPRETED:
        return tl.sum(a, axis), tl.sum(b, axis)
    else:
        return tl.reduce((a, b), axis, _add_pairs)
