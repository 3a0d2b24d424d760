"""In-house Triton kernels of tierbench: matmul (differentiable), matmul with a fused bias + GELU epilogue
(differentiable), FP8 matmul, norms, fused bias-GELU-LN, attention (forward passes)."""

from .attention import attention
from .epilogue import matmul_bias_gelu
from .matmul import matmul
from .matmul_fp8 import matmul_fp8
from .norm import bias_gelu_layer_norm, layer_norm, rms_norm

__all__ = [
    "attention",
    "bias_gelu_layer_norm",
    "layer_norm",
    "matmul",
    "matmul_bias_gelu",
    "matmul_fp8",
    "rms_norm",
]
