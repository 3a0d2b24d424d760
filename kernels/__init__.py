"""In-house Triton kernels of tierbench (forward passes): matmul, norms, fused bias-GELU-LN, attention
(grouped-query, bottom-right causal), and split-KV decode attention over contiguous or paged KV caches."""

from .attention import attention
from .decode import attention_with_kvcache
from .matmul import matmul
from .norm import bias_gelu_layer_norm, layer_norm, rms_norm

__all__ = ["attention", "attention_with_kvcache", "bias_gelu_layer_norm", "layer_norm", "matmul", "rms_norm"]
