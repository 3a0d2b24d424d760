"""In-house Triton kernels of tierbench: matmul (differentiable), matmul with a fused bias + GELU epilogue
(differentiable), FP8 matmul, norms, fused bias-GELU-LN, attention (grouped-query, bottom-right causal), and
split-KV decode attention over contiguous or paged KV caches.

Every public kernel takes its op's signature (the tensors in order, then keyword options), so the triton
tier calls it as it calls the others; `DTYPES` says which input dtypes each accepts.
"""

import torch

from .attention import attention
from .decode import attention_with_kvcache
from .epilogue import matmul_bias_gelu
from .matmul import matmul
from .matmul_fp8 import matmul_fp8
from .norm import bias_gelu_layer_norm, layer_norm, rms_norm

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_HALF = (torch.float16, torch.bfloat16)
DTYPES: dict[str, tuple[torch.dtype, ...]] = {
    "attention": _HALF,
    "attention_with_kvcache": _HALF,
    "bias_gelu_layer_norm": _FLOATS,
    "layer_norm": _FLOATS,
    "matmul": _FLOATS,
    "matmul_bias_gelu": _FLOATS,
    "matmul_fp8": (torch.float8_e4m3fn, torch.float8_e5m2),
    "rms_norm": _FLOATS,
}

# The launch log (`_common.last_launch`) a kernel writes where it is not named after the kernel's op family.
LAUNCH_LOGS: dict[str, str] = {"attention_with_kvcache": "attention"}

__all__ = [
    "DTYPES",
    "LAUNCH_LOGS",
    "attention",
    "attention_with_kvcache",
    "bias_gelu_layer_norm",
    "layer_norm",
    "matmul",
    "matmul_bias_gelu",
    "matmul_fp8",
    "rms_norm",
]
