"""The cuda tier: hand-written CUDA and CuTe-DSL kernels from their authors' packages, a module per package.

Attention comes from the three flash-attn generations (cuda_flash_attn.py), RMSNorm and LayerNorm from quack
(cuda_quack.py), and the FP8 product with per-tensor scales from quack's Hopper GEMM (cuda_quack_fp8.py);
what they share (whether a package imports, its version, the device's compute capability) is in
cuda_packages.py, and decode's KV-cache entry points in its family's module (suite/ops/decode.py).

The CuTe-DSL kernels compile on their first call for each shape family; the runner makes that call inside
prepare_s, so compile time is recorded there and the timed calls, on the same tensors, only hit the packages'
compile caches.
"""

from __future__ import annotations

from ..ops.base import Op
from . import cuda_flash_attn, cuda_quack, cuda_quack_fp8
from .base import Provider


def providers(ops: list[Op]) -> list[Provider]:
    return cuda_flash_attn.providers(ops) + cuda_quack.providers(ops) + cuda_quack_fp8.providers(ops)
