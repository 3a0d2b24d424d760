"""Each family notes the config of its latest launch: the autotuner's pick, or the config forced."""

import importlib

import torch

from tierbench.kernels import attention, layer_norm, matmul, rms_norm
from tierbench.kernels._common import last_launch, launch_with_backward

nm = importlib.import_module("tierbench.kernels.norm")


def test_each_family_names_the_config_it_launched(device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 64, generator=g).to(device)
    layer_norm(x, None, None)
    assert last_launch("norm").startswith("whole-row: CHUNK=0, ROWS=") and "warps=" in last_launch("norm")
    nm._norm_forward(x, None, None, None, 1e-5, False, config=nm.norm_config(chunk=32, evict=1, warps=2))
    assert last_launch("norm") == "two-pass: CHUNK=32, ROWS=1, CTAS=0, EVICT=1, warps=2, stages=1"
    rms_norm(x, None)
    assert last_launch("norm").startswith("whole-row:")

    a, b = torch.randn(33, 17, generator=g).to(device), torch.randn(17, 65, generator=g).to(device)
    matmul(a, b)
    assert last_launch("matmul").startswith("ptr: BLOCK_M=")  # odd strides: the pointer path

    q, k, v = (torch.randn(1, 2, 17, 64, generator=g).to(device=device, dtype=torch.float16) for _ in range(3))
    attention(q, k, v, causal=True)
    assert last_launch("attention").startswith("causal, per-head descriptors: BLOCK_M=")  # seq 17: not packed
    assert last_launch("nothing") is None


def test_a_backward_is_named_after_the_forward_it_followed(device):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(5, 48, generator=g).to(device).requires_grad_()
    w = torch.randn(48, generator=g).to(device).requires_grad_()
    rms_norm(x, w).sum().backward()
    said = launch_with_backward("norm")
    forward, backward = said.split(" | ")
    assert forward == last_launch("norm") and forward.startswith("whole-row:")
    assert backward == f"norm-bwd: {last_launch('norm-bwd')}"
    # A later forward alone: the earlier backward is not its own.
    with torch.no_grad():
        rms_norm(x, w)
    assert launch_with_backward("norm") == last_launch("norm")
    # The matmul's backward runs two products: the record names the last one's log (dB, after dA).
    a = torch.randn(9, 7, generator=g).to(device).requires_grad_()
    b = torch.randn(7, 11, generator=g).to(device).requires_grad_()
    matmul(a, b).sum().backward()
    assert launch_with_backward("matmul").split(" | ")[1].startswith("matmul-bwd: ")
    assert launch_with_backward("never") is None
