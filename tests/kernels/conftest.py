"""Shared setup for the kernel tests: interpreter switch, devices, the tolerance table, the comparison."""

import os

import torch

# Without a CUDA GPU the Triton kernels run under Triton's interpreter on CPU tensors. This must be
# decided before anything imports triton (triton.jit picks compile vs interpret when it decorates).
if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

from tierbench.suite.measure.checking import TOLERANCE  # noqa: E402 - the project's one tolerance table


def pytest_configure(config):
    # Triton's interpreter converts 1-element arrays to ints, which numpy >= 1.25 warns about per launch.
    config.addinivalue_line("filterwarnings", "ignore:Conversion of an array with ndim > 0:DeprecationWarning")
    # The fused GELU's exp2 overflows to inf in the left tail by design (the result saturates to -0);
    # the interpreter evaluates it with numpy, which warns.
    config.addinivalue_line("filterwarnings", "ignore:overflow encountered in exp2:RuntimeWarning")


@pytest.fixture
def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@pytest.fixture
def wrong_device() -> torch.device:
    """A device the kernels must refuse: CPU on a GPU machine, 'meta' under the interpreter."""
    return torch.device("cpu" if torch.cuda.is_available() else "meta")


@pytest.fixture
def assert_close():
    def check(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, what: str = "") -> float:
        assert out.dtype == dtype, f"{what}: output dtype {out.dtype}, expected {dtype}"
        assert out.shape == ref.shape, f"{what}: output shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
        assert torch.isfinite(out).all(), f"{what}: output has NaN/inf (unwritten or broken elements)"
        ref = ref.to(device=out.device, dtype=torch.float64)
        err = ((out.double() - ref).norm() / ref.norm()).item()
        assert err <= TOLERANCE[dtype], f"{what}: relative error {err:.2e} > {TOLERANCE[dtype]:.0e} ({dtype})"
        return err

    return check
