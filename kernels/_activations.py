"""GELU and its derivative for the matmul epilogue and its backward, in fp32 registers.

`ACTIVATION` codes (a constexpr of the kernels): NONE, GELU (exact, erf) and GELU_TANH (the tanh
approximation, as `torch.nn.functional.gelu(..., approximate="tanh")`). The tanh form is written as
x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), since 0.5 (1 + tanh(u)) = sigmoid(2u): one MUFU exp2 and
one MUFU reciprocal (an IEEE division there cost more than the rest of the activation), and the tails
saturate to x or -0 without a NaN. The exact GELU's forward is x * Phi(x) with Phi the fused norm's
fitted form (kernels/_norm_math.py): libdevice's erff, a branch and two polynomials, made the epilogue 0.53x
of the plain kernel at 2048^3 on an H100. As in the norm kernels, `PRECISE` (a float32 output) takes the
7-term fit (the GELU within 7.8e-7) and a 16-bit output the 5-term one (within 3.6e-6, far below a 16-bit
rounding), two FMAs an element fewer.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._common import INTERPRET
from ._norm_math import _exp2, _gelu_erf, _reciprocal

NONE = 0
GELU = 1
GELU_TANH = 2

# torch.nn.functional.gelu's `approximate` argument -> activation code.
GELU_CODES = {"none": GELU, "tanh": GELU_TANH}

_SQRT1_2: tl.constexpr = tl.constexpr(0.7071067811865476)
_INV_SQRT_2PI: tl.constexpr = tl.constexpr(0.3989422804014327)
_SQRT_2_OVER_PI: tl.constexpr = tl.constexpr(0.7978845608028654)
_TANH_CUBIC: tl.constexpr = tl.constexpr(0.044715)
_MINUS_2_LOG2E: tl.constexpr = tl.constexpr(-2.8853900817779268)  # exp(-2u) = 2^(u * this)
_INLINE_PTX: tl.constexpr = tl.constexpr(not INTERPRET)  # MUFU exp2 and reciprocal (PTX only compiled)


@triton.jit
def _sigmoid_2u(x):
    # sigmoid(2u) of the tanh GELU, u = sqrt(2/pi) (x + 0.044715 x^3).
    u = _SQRT_2_OVER_PI * (x + _TANH_CUBIC * x * x * x)
    return _reciprocal(1.0 + _exp2(u * _MINUS_2_LOG2E, _INLINE_PTX), _INLINE_PTX)


@triton.jit
def activate(x, ACTIVATION: tl.constexpr, PRECISE: tl.constexpr):
    """The activation of fp32 `x`; PRECISE: float32 accuracy (else enough for a 16-bit output)."""
    if ACTIVATION == 1:
        return _gelu_erf(x, 1, PRECISE, _INLINE_PTX)
    elif ACTIVATION == 2:
        return x * _sigmoid_2u(x)
    else:
        return x


@triton.jit
def activation_grad(x, ACTIVATION: tl.constexpr):
    """d activation / dx at fp32 `x`."""
    if ACTIVATION == 1:
        # Phi(x) + x phi(x)
        return 0.5 * (1.0 + tl.math.erf(x * _SQRT1_2)) + x * _INV_SQRT_2PI * tl.exp(-0.5 * x * x)
    elif ACTIVATION == 2:
        # s + x s (1 - s) d(2u)/dx, with s = sigmoid(2u) and d(2u)/dx = 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2)
        s = _sigmoid_2u(x)
        return s + x * s * (1.0 - s) * (2.0 * _SQRT_2_OVER_PI) * (1.0 + 3.0 * _TANH_CUBIC * x * x)
    else:
        return tl.full(x.shape, 1.0, tl.float32)
