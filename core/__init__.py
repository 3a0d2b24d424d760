"""tierbench: a GPU-kernel benchmark harness and regression tracker.

The package itself stays light (it imports neither torch nor the tiers until asked): `tierbench.timing`
is the timer that the harness and the kernels' tuner share, and the names below are the library API,
loaded on first use.

    import tierbench
    records = tierbench.measure(my_rms_norm, op="rms_norm", params={"rows": 4096, "hidden": 1024})
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("tierbench")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

# name -> module that defines it (imported on first access, so `import tierbench` costs nothing)
_API = {
    "measure": "tierbench.suite.measure.api",
    "Measurement": "tierbench.suite.store.records",
    # what a plugin defines (docs/plugins.md)
    "Op": "tierbench.suite.ops.base",
    "Family": "tierbench.suite.ops.base",
    "FamilySuite": "tierbench.suite.ops.base",
    "View": "tierbench.suite.ops.base",
    "CostPanel": "tierbench.suite.show.panels",
    "TradePanel": "tierbench.suite.show.panels",
    "ModelPanel": "tierbench.suite.show.panels",
    "Case": "tierbench.suite.ops.base",
    "WorkModel": "tierbench.suite.ops.base",
    "DType": "tierbench.suite.ops.base",
    "Mode": "tierbench.suite.ops.base",
    "Provider": "tierbench.suite.providers.base",
    "Prepared": "tierbench.suite.providers.base",
    "Unavailable": "tierbench.suite.providers.base",
    "call_provider": "tierbench.suite.providers.base",
    "Tier": "tierbench.suite.tiers",
    "plugin_tier": "tierbench.suite.tiers",
    "builtin_op": "tierbench.suite.ops",
    # helpers a plugin may rely on
    "randn": "tierbench.suite.ops.base",
    "per_pass": "tierbench.suite.ops.base",
    "element_size": "tierbench.suite.ops.base",
    "hi_precision": "tierbench.suite.ops.base",
    "choice_name": "tierbench.suite.ops.base",
    "positive": "tierbench.suite.ops.base",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'tierbench' has no attribute {name!r}")
