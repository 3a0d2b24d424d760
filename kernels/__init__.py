"""In-house Triton kernels of tierbench: matmul, norms, fused bias-GELU-LN, attention.

Every public kernel takes its op's signature (the tensors in order, then keyword options), so the triton
tier calls it as it calls the others; `DTYPES` says which input dtypes each accepts.
"""

import torch

from .attention import attention
from .matmul import matmul
from .norm import bias_gelu_layer_norm, layer_norm, rms_norm

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
DTYPES: dict[str, tuple[torch.dtype, ...]] = {
    "attention": (torch.float16, torch.bfloat16),
    "bias_gelu_layer_norm": _FLOATS,
    "layer_norm": _FLOATS,
    "matmul": _FLOATS,
    "rms_norm": _FLOATS,
}

__all__ = ["DTYPES", "attention", "bias_gelu_layer_norm", "layer_norm", "matmul", "rms_norm"]
