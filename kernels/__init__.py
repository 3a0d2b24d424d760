"""In-house Triton kernels of tierbench: matmul, matmul with a fused bias + GELU epilogue, FP8 matmul, norms,
fused bias-GELU-LN, attention (grouped-query, bottom-right causal), split-KV decode attention over
contiguous or paged KV caches, and a transformer block's pointwise ops: SwiGLU, the residual add and the
residual add fused with RMSNorm.

matmul, the epilogue, the norms, the fused ops, attention and SwiGLU are differentiable through
torch.autograd (their backward kernels: matmul.py's transposed-operand products, epilogue.py,
norm_backward.py, attention_backward.py, swiglu.py, residual.py): the forward saves what the backward needs
only where an input requires grad.

Every public kernel takes its op's signature (the tensors in order, then keyword options), so the triton
tier calls it as it calls the others; `DTYPES` says which input dtypes each accepts. Each public module
declares its kernels in `EXPORTS` (`_common.Export`: dtypes, launch log, compute capability), which this
package gathers: a module whose name starts with `_` is private.
"""

import importlib
import pkgutil

import torch

from ._common import Export

# Each public module declares what it exports (`EXPORTS`, kernels/_common.Export): a new kernel module joins
# by declaring, with no line here. All modules are imported before any name is bound, so a kernel named as
# its module (matmul, attention) is the function, never the module the import system sets in its place.
_MODULES = [
    importlib.import_module(f".{info.name}", __name__)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name)
    if not info.name.startswith("_")
]
_EXPORTS: dict[str, tuple[object, Export]] = {
    name: (getattr(module, name), export)
    for module in _MODULES
    for name, export in getattr(module, "EXPORTS", {}).items()
}
globals().update({name: function for name, (function, _) in _EXPORTS.items()})

DTYPES: dict[str, tuple[torch.dtype, ...]] = {name: export.dtypes for name, (_, export) in _EXPORTS.items()}
# The launch log each kernel's forward writes (_common.last_launch): what a record names as its launch, with
# the backward's logs where its timed call ran one (_common.launch_with_backward).
LAUNCH_LOGS: dict[str, str] = {name: export.launch_log for name, (_, export) in _EXPORTS.items()}
# Kernels that need a GPU of at least this compute capability, and what for.
COMPUTE_CAPABILITY: dict[str, tuple[tuple[int, int], str]] = {
    name: export.needs for name, (_, export) in _EXPORTS.items() if export.needs is not None
}

__all__ = ["COMPUTE_CAPABILITY", "DTYPES", "LAUNCH_LOGS", *sorted(_EXPORTS)]
