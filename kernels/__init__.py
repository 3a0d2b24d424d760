"""In-house Triton kernels of tierbench (forward passes): matmul, norms, fused bias-GELU-LN, attention."""

from .attention import attention
from .matmul import matmul
from .norm import bias_gelu_layer_norm, layer_norm, rms_norm

__all__ = ["attention", "bias_gelu_layer_norm", "layer_norm", "matmul", "rms_norm"]
