"""In-house Triton kernels of tierbench: matmul, matmul with a fused bias + GELU epilogue, FP8 matmul, norms,
fused bias-GELU-LN, attention (grouped-query, bottom-right causal), split-KV decode attention over
contiguous or paged KV caches, and a transformer block's pointwise ops: SwiGLU, the residual add and the
residual add fused with RMSNorm.

matmul, the epilogue, the norms, the fused ops, attention and SwiGLU are differentiable through
torch.autograd (their backward kernels: matmul.py's transposed-operand products, epilogue.py,
norm_backward.py, attention_backward.py, swiglu.py, residual.py): the forward saves what the backward needs
only where an input requires grad.

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
from .residual import add_rms_norm, residual_add
from .swiglu import swiglu

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_HALF = (torch.float16, torch.bfloat16)
DTYPES: dict[str, tuple[torch.dtype, ...]] = {
    "add_rms_norm": _FLOATS,
    "attention": _HALF,
    "attention_with_kvcache": _HALF,
    "bias_gelu_layer_norm": _FLOATS,
    "layer_norm": _FLOATS,
    "matmul": _FLOATS,
    "matmul_bias_gelu": _FLOATS,
    "matmul_fp8": (torch.float8_e4m3fn, torch.float8_e5m2),
    "residual_add": _FLOATS,
    "rms_norm": _FLOATS,
    "swiglu": _FLOATS,
}
# The launch log each kernel's forward writes (_common.last_launch): what a record names as its launch.
LAUNCH_LOGS: dict[str, str] = {
    "add_rms_norm": "add-rms-norm",
    "attention": "attention",
    "attention_with_kvcache": "attention",
    "bias_gelu_layer_norm": "norm",
    "layer_norm": "norm",
    "matmul": "matmul",
    "matmul_bias_gelu": "matmul-epilogue",
    "matmul_fp8": "matmul-fp8",
    "residual_add": "residual",
    "rms_norm": "norm",
    "swiglu": "swiglu",
}
# Kernels that need a GPU of at least this compute capability, and what for.
COMPUTE_CAPABILITY: dict[str, tuple[tuple[int, int], str]] = {
    "matmul_fp8": ((9, 0), "TMA and FP8 wgmma"),
}

__all__ = [
    "COMPUTE_CAPABILITY",
    "DTYPES",
    "LAUNCH_LOGS",
    "add_rms_norm",
    "attention",
    "attention_with_kvcache",
    "bias_gelu_layer_norm",
    "layer_norm",
    "matmul",
    "matmul_bias_gelu",
    "matmul_fp8",
    "residual_add",
    "rms_norm",
    "swiglu",
]
