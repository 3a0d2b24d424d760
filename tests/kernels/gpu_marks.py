"""Skip marks of the kernel tests that need a particular GPU."""

import pytest
import torch

# The Gluon kernels are written for sm_90 alone (wgmma, TMA and setmaxnreg as Hopper has them).
on_hopper = pytest.mark.skipif(
    not (torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)),
    reason="needs an sm_90 (Hopper) GPU",
)
