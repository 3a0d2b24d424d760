"""What the cuda tier's providers share: whether an author's package imports (and why not), which version is
installed, the device's compute capability, and how a rule words a refusal.

Rules are pure functions of (compute capability, dtype, head_dim), read from the packages' own checks, so that
a case a package rejects is recorded as skipped with the reason rather than failing inside the package.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

import torch

from .base import Provider, needs_cuda

CC = tuple[int, int]

HALF = ("fp16", "bf16")


@cache
def _import(module: str) -> ModuleType | Exception:
    """The module, or the exception importing it raised (cached: a failed import would re-run every time)."""
    try:
        return importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - a broken install (missing .so, CUDA mismatch) is a reason, not a crash
        return exc.with_traceback(None)


def import_problem(module: str, install: str) -> str | None:
    """Why `module` cannot be used: not installed or installed but broken, with `install` (how to get it)."""
    loaded = _import(module)
    if isinstance(loaded, ModuleType):
        return None
    detail = f"{type(loaded).__name__}: {loaded}"
    missing = getattr(loaded, "name", None) if isinstance(loaded, ModuleNotFoundError) else None
    if missing and (module == missing or module.startswith(missing + ".")):
        return f"package not installed: {module} ({detail}); {install}"
    return f"package broken: {module} is installed but does not import ({detail}); reinstall: {install}"


def attribute(module: str, name: str) -> Any:
    """`module.name`, or None where the module does not import or lacks it."""
    loaded = _import(module)
    return getattr(loaded, name, None) if isinstance(loaded, ModuleType) else None


@cache
def _installed_version(distributions: tuple[str, ...], owner_of: str | None) -> str | None:
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    if owner_of:
        # Builds from source have named themselves differently over time (flash-attn 3 was once `flash_attn`):
        # ask which installed distribution provides the module.
        for name in importlib.metadata.packages_distributions().get(owner_of, []):
            try:
                return importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                continue
    return None


def package_version_of(
    distributions: tuple[str, ...], owner_of: str | None = None, module: str | None = None
) -> str | None:
    """The first installed of `distributions`, else the distribution owning the top-level module `owner_of`,
    else the `__version__` of `module` if it is already imported (never imported here: records stay cheap)."""
    found = _installed_version(distributions, owner_of)
    if found is None and module is not None and module in sys.modules:
        version = getattr(sys.modules[module], "__version__", None)
        found = str(version) if version else None
    return found


@dataclass(frozen=True)
class CudaTierProvider(Provider):
    """A Provider whose record version is looked up in several places (base.Provider asks one distribution)."""

    distributions: tuple[str, ...] = ()
    owner_of: str | None = None
    version_module: str | None = None

    def version(self) -> str | None:
        return package_version_of(self.distributions or (self.package,), self.owner_of, self.version_module)


# --- The device and how rules word a refusal -------------------------------------------------------------


def device_problem(device: torch.device) -> str | None:
    return needs_cuda(device)


def cc_text(cc: CC) -> str:
    return f"{cc[0]}.{cc[1]}"


def too_old(cc: CC, who: str, need: CC) -> str:
    return f"compute capability {cc_text(cc)} too old: {who} needs {cc_text(need)} or newer"


def dtype_problem(dtype: str, who: str, allowed: tuple[str, ...] = HALF) -> str | None:
    return None if dtype in allowed else f"dtype {dtype} unsupported: {who} takes {' and '.join(allowed)}"


def on_gpu(device: torch.device) -> CC | str:
    """The device's compute capability, or why there is none."""
    reason = device_problem(device)
    return reason if reason else torch.cuda.get_device_capability(device)
