"""Shared fixtures: Hydra composition of the real config tree, and a CPU run context."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent

if not torch.cuda.is_available():
    # Triton kernels run through the interpreter on a CPU; set before anything imports tierbench.kernels.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none visible to PyTorch)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def compose():
    """compose(overrides) -> the run config exactly as `tierbench run` would build it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from tierbench.suite.config import register_configs
    from tierbench.suite.run_command import conf_dir

    register_configs()

    def _compose(overrides: list[str] | None = None):
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
            return hydra_compose(config_name="config", overrides=overrides or [])

    yield _compose
    GlobalHydra.instance().clear()
