"""Fit of the fused kernel's GELU: x * Phi(x) as x * sigmoid(g(x)), g an odd polynomial (not collected by pytest).

    python experiments/fit_gelu.py

Phi(x) = sigmoid(logit Phi(x)) holds exactly; the kernel replaces logit Phi by an odd polynomial g, so the
GELU costs one exp2, one reciprocal and a Horner chain, with no branch and no range check: g grows to
+-infinity with x, so the exp2 saturates to 0 or inf and the result to x or -0, as the exact GELU does.
The fit minimises the GELU's absolute error, max |x| * Phi(1 - Phi) * |g - logit Phi| (iteratively
reweighted least squares), on [0, 6]; the tails beyond contribute < 1e-8. Prints the coefficients
already multiplied by -log2(e), as `kernels/_norm_math.py` holds them, and the error of a float32 evaluation
(exp2 and reciprocal rounded to float32) over [-15, 15], against the float64 exact GELU.
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr, ndtr

LOG2E = 1.4426950408889634


def fit(terms: int, limit: float = 6.0) -> np.ndarray:
    """Coefficients c of g(x) = sum c_i x^(2i+1), i < terms (terms odd, so the leading one is positive)."""
    x = np.linspace(0.0, limit, 40001)
    target = log_ndtr(x) - log_ndtr(-x)  # logit Phi, accurate in both tails
    sensitivity = x * ndtr(x) * ndtr(-x) + 1e-14  # d GELU / d g
    basis = np.stack([x ** (2 * i + 1) for i in range(terms)], axis=1)
    weight = np.ones_like(x)
    for _ in range(200):
        w = weight * sensitivity
        coef, *_ = np.linalg.lstsq(basis * w[:, None], target * w, rcond=None)
        err = np.abs((basis @ coef - target) * sensitivity)
        weight *= (err / err.max() + 1e-4) ** 0.3
        weight /= weight.max()
    return coef


def gelu_float32(x: np.ndarray, scaled: np.ndarray) -> np.ndarray:
    """The kernel's arithmetic in float32: Horner in x^2, exp2, 1 / (1 + e), times x."""
    x = x.astype(np.float32)
    z = x * x
    p = np.float32(scaled[-1])
    for c in scaled[-2::-1]:
        p = (p * z + np.float32(c)).astype(np.float32)
    with np.errstate(over="ignore"):
        e = np.exp2(x * p).astype(np.float32)
    return x * (np.float32(1.0) / (np.float32(1.0) + e))


def main() -> None:
    xs = np.linspace(-15.0, 15.0, 600001)
    exact = xs * ndtr(xs)
    for terms in (5, 7):
        coef = fit(terms)
        g = sum(c * xs ** (2 * i + 1) for i, c in enumerate(coef))
        assert np.all(np.diff(g) > 0), "g must be increasing, or the GELU turns back in a tail"
        scaled = (-LOG2E * coef).astype(np.float32)
        err = np.abs(gelu_float32(xs, scaled).astype(np.float64) - exact)
        print(f"{terms} terms: max abs error {err.max():.2e} (float32 evaluation)")
        print("  coefficients x -log2(e), constant term first:", ", ".join(f"{c:.9e}" for c in scaled))


if __name__ == "__main__":
    main()
