"""In-house Triton kernels of tierbench: matmul, norms, fused bias-GELU-LN, attention (grouped-query,
bottom-right causal), and split-KV decode attention over contiguous or paged KV caches.

Every public kernel takes its op's signature (the tensors in order, then keyword options), so the triton
tier calls it as it calls the others; `DTYPES` says which input dtypes each accepts.
"""

import torch

from .attention import attention
from .decode import attention_with_kvcache
from .matmul import matmul
from .norm import bias_gelu_layer_norm, layer_norm, rms_norm

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_HALF = (torch.float16, torch.bfloat16)
DTYPES: dict[str, tuple[torch.dtype, ...]] = {
    "attention": _HALF,
    "attention_with_kvcache": _HALF,
    "bias_gelu_layer_norm": _FLOATS,
    "layer_norm": _FLOATS,
    "matmul": _FLOATS,
    "rms_norm": _FLOATS,
}

__all__ = [
    "DTYPES",
    "attention",
    "attention_with_kvcache",
    "bias_gelu_layer_norm",
    "layer_norm",
    "matmul",
    "rms_norm",
]
