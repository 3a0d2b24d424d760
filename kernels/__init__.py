"""In-house Triton kernels of tierbench: matmul, norms, fused bias-GELU-LN, attention.

The norms, the fused op and attention are also differentiable through torch.autograd (their backward
kernels are in norm_backward.py and attention_backward.py): the forward saves what the backward needs only
where an input requires grad. matmul is forward only.
"""

from .attention import attention
from .matmul import matmul
from .norm import bias_gelu_layer_norm, layer_norm, rms_norm

__all__ = ["attention", "bias_gelu_layer_norm", "layer_norm", "matmul", "rms_norm"]
